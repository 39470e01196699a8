//go:build !cgo

package cpu

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
)

// loadOpenBLAS needs cgo to load a shared library; without it the engine
// is pure Go.
func loadOpenBLAS([]string) (blas.Float32, string, error) {
	return nil, "", fmt.Errorf("OpenBLAS is loaded through cgo, and this binary was built without it (CGO_ENABLED=0): %w", ErrEngine)
}
