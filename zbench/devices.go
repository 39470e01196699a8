package zbench

import "github.com/zbench/zbench/kernels"

// Devices returns the backends registered in this program and available on
// this machine. Package zbench registers none: a program that runs
// benchmarks imports the backends it wants, as bench_test and the zbench
// command do,
//
//	import _ "github.com/zbench/zbench/kernels/cpu" // registers "cpu"
//
// and, in files built with the cuda tag, kernels/cuda, whose device is
// present when a GPU is. The offline analysis (results, compare, report,
// calibrate) thus links neither BLAS nor CUDA. A backend that is built in
// but fails for a reason other than a missing device is reported in err.
func Devices() ([]kernels.Backend, error) { return kernels.Available() }
