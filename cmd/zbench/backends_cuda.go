//go:build cuda

package main

import _ "github.com/zbench/zbench/kernels/cuda" // registers "cuda" where a GPU is present
