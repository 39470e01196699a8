//go:build !cgo

package cpu

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
)

// loadOneDNN needs cgo to load a shared library; without it the engine is
// pure Go.
func loadOneDNN([]string) (blas.Float32, string, error) {
	return nil, "", fmt.Errorf("oneDNN is loaded through cgo, and this binary was built without it (CGO_ENABLED=0): %w", ErrEngine)
}
