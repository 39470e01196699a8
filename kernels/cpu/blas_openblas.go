//go:build openblas

// Build and test with OpenBLAS (cgo and a C compiler required, Debian/Ubuntu
// package libopenblas-dev installed):
//
//	go test -tags openblas ./...
//
// The cgo directive below links libopenblas, which provides the CBLAS
// symbols (cblas_sgemm, …) that gonum.org/v1/netlib/blas/netlib calls; that
// package carries its own cblas.h but no #cgo LDFLAGS, so without this file
// the link would need CGO_LDFLAGS=-lopenblas. If OpenBLAS is installed
// outside the linker's search path, add it with
// CGO_LDFLAGS="-L/path/to/lib" and, at run time, LD_LIBRARY_PATH.
// OpenBLAS's own threads follow OPENBLAS_NUM_THREADS (default: all cores).

package cpu

/*
#cgo LDFLAGS: -lopenblas
*/
import "C"

import (
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/netlib/blas/netlib"
)

// blasName names the matmul library in the environment lines.
const blasName = "openblas"

func init() {
	blas32.Use(netlib.Implementation{})
}
