//go:build cuda

package gpt2_test

import _ "github.com/zbench/zbench/kernels/cuda" // registers "cuda" where a GPU is present
