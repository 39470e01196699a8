//go:build cuda

package bench_test

import _ "github.com/zbench/zbench/kernels/cuda" // registers "cuda" where a GPU is present
