//go:build cgo

package cpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef void (*zb_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
	const float *, int, float, float *, int);
typedef void (*zb_set_threads_fn)(int);
typedef char *(*zb_config_fn)(void);

static zb_sgemm_fn zb_sgemm;

// zb_openblas opens the library and resolves cblas_sgemm; it sets the
// library's thread count when threads > 0 and returns its configuration
// string (NULL when the library has none), or sets *err.
static const char *zb_openblas(const char *name, int threads, const char **err) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		*err = dlerror();
		return NULL;
	}
	zb_sgemm_fn sgemm = (zb_sgemm_fn)dlsym(h, "cblas_sgemm");
	if (sgemm == NULL) {
		*err = "no cblas_sgemm in the library";
		return NULL;
	}
	zb_set_threads_fn set = (zb_set_threads_fn)dlsym(h, "openblas_set_num_threads");
	if (set == NULL) {
		*err = "no openblas_set_num_threads: not OpenBLAS";
		return NULL;
	}
	if (threads > 0) {
		set(threads);
	}
	zb_sgemm = sgemm;
	zb_config_fn config = (zb_config_fn)dlsym(h, "openblas_get_config");
	return config != NULL ? config() : "";
}

// zb_cblas_sgemm is cblas_sgemm in row-major order (CblasRowMajor = 101;
// CblasNoTrans = 111, CblasTrans = 112).
static void zb_cblas_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
		const float *b, int ldb, float beta, float *c, int ldc) {
	zb_sgemm(101, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// loadOpenBLAS opens the first of names that loads (dlopen, so that
// nothing links against it) and returns gonum's implementation with
// OpenBLAS's SGEMM in place of its own. OpenBLAS runs GOMAXPROCS threads
// unless OPENBLAS_NUM_THREADS says otherwise.
func loadOpenBLAS(names []string) (blas.Float32, string, error) {
	threads := runtime.GOMAXPROCS(0)
	if os.Getenv("OPENBLAS_NUM_THREADS") != "" {
		threads = 0
	}
	var errs []string
	for _, name := range names {
		cname := C.CString(name)
		var cerr *C.char
		config := C.zb_openblas(cname, C.int(threads), &cerr)
		C.free(unsafe.Pointer(cname))
		if config != nil {
			return openBLASImpl{}, strings.TrimSpace(C.GoString(config)), nil
		}
		errs = append(errs, C.GoString(cerr))
	}
	return nil, "", fmt.Errorf("OpenBLAS cannot be loaded (%s; Debian: apt-get install libopenblas0): %w",
		strings.Join(errs, "; "), ErrEngine)
}

// openBLASImpl is gonum's BLAS with OpenBLAS's SGEMM.
type openBLASImpl struct{ gonum.Implementation }

// Sgemm computes c = alpha·op(a)·op(b) + beta·c in OpenBLAS. Degenerate
// calls, and arguments that do not describe the slices (which gonum
// reports with a panic), go to gonum.
func (o openBLASImpl) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !sgemmArgsOK(tA, tB, m, n, k, alpha, a, lda, b, ldb, c, ldc) || max(m, n, k, lda, ldb, ldc) > math.MaxInt32 {
		o.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	C.zb_cblas_sgemm(cblasTrans(tA), cblasTrans(tB), C.int(m), C.int(n), C.int(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(&a[0])), C.int(lda), (*C.float)(unsafe.Pointer(&b[0])), C.int(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.int(ldc))
}

// cblasTrans is CBLAS's code of a transpose.
func cblasTrans(t blas.Transpose) C.int {
	if t == blas.NoTrans {
		return 111
	}
	return 112
}
