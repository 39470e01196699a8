//go:build cuda

package zbench

import _ "github.com/zbench/zbench/kernels/cuda" // registers "cuda"
