package bench_test

import (
	"github.com/zbench/zbench/internal/golden"
	"github.com/zbench/zbench/models/safetensors"
)

// The readers of golden cases that the model benchmarks' own golden files
// use (resnet_test.go), from internal/golden. The kernel goldens run in
// kernels/kerneltest (RunGolden), on each backend's tests.

// roleData is one role of a golden case.
type roleData = golden.Role

var (
	readParams = golden.ReadParams
	readRole   = golden.ReadRole
	checkRoles = golden.CheckRoles
)

// openGolden opens the golden file at path and returns it with its case
// names, sorted (golden.OpenPath).
func openGolden(path string) (*safetensors.File, []string, error) {
	f, err := golden.OpenPath(path)
	if err != nil {
		return nil, nil, err
	}
	return f.File, f.Names(), nil
}
