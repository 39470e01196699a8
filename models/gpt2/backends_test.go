package gpt2_test

import _ "github.com/zbench/zbench/kernels/cpu" // registers "cpu"
