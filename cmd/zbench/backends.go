package main

// env and infer run on the registered backends.
import _ "github.com/zbench/zbench/kernels/cpu" // registers "cpu"
