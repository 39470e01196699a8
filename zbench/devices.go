// Package zbench is the benchmark harness: the devices to run on, Measure
// around testing.B (warm-up outside the timer, the device synchronised inside
// it, metrics reported), the roofline guard that refuses results above a
// device's peak, the environment printed as benchfmt configuration lines,
// golden-file comparison, and the statistics the CLI builds on.
package zbench

import (
	"github.com/zbench/zbench/kernels"
	_ "github.com/zbench/zbench/kernels/cpu" // registers "cpu"
)

// Devices returns the backends available on this machine: cpu always, cuda
// when built with the cuda tag and a GPU is present. A backend that is built
// in but fails for a reason other than a missing device is reported in err.
func Devices() ([]kernels.Backend, error) { return kernels.Available() }
