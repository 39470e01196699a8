//go:build cgo

package cpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

// oneDNN's GEMM entry points (row-major; 'N' or 'T'; they return a
// dnnl_status_t, 0 on success) and dnnl_version's record.
typedef int (*zb_dnnl_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
	const float *, int64_t, float, float *, int64_t);
typedef int (*zb_dnnl_bf16_fn)(char, char, int64_t, int64_t, int64_t, float, const uint16_t *, int64_t,
	const uint16_t *, int64_t, float, float *, int64_t);
typedef struct {
	int major, minor, patch;
	const char *hash;
	unsigned cpu_runtime, gpu_runtime;
} zb_dnnl_version_t;
typedef const zb_dnnl_version_t *(*zb_dnnl_version_fn)(void);
typedef int (*zb_dnnl_isa_fn)(void);

static zb_dnnl_sgemm_fn zb_dnnl_sgemm_p;
static zb_dnnl_bf16_fn zb_dnnl_bf16_p;

// zb_onednn opens the library and resolves its GEMMs; it returns the
// library's version and fills *isa with the instruction set its kernels
// use, or sets *err.
static const zb_dnnl_version_t *zb_onednn(const char *name, int *isa, const char **err) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		*err = dlerror();
		return NULL;
	}
	zb_dnnl_sgemm_fn sgemm = (zb_dnnl_sgemm_fn)dlsym(h, "dnnl_sgemm");
	zb_dnnl_bf16_fn bf16 = (zb_dnnl_bf16_fn)dlsym(h, "dnnl_gemm_bf16bf16f32");
	zb_dnnl_version_fn version = (zb_dnnl_version_fn)dlsym(h, "dnnl_version");
	zb_dnnl_isa_fn get_isa = (zb_dnnl_isa_fn)dlsym(h, "dnnl_get_effective_cpu_isa");
	if (sgemm == NULL || bf16 == NULL || version == NULL || get_isa == NULL) {
		*err = "no dnnl_sgemm, dnnl_gemm_bf16bf16f32, dnnl_version or dnnl_get_effective_cpu_isa in the library";
		return NULL;
	}
	zb_dnnl_sgemm_p = sgemm;
	zb_dnnl_bf16_p = bf16;
	*isa = get_isa();
	return version();
}

static int zb_dnnl_sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
		const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
	return zb_dnnl_sgemm_p(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static int zb_dnnl_bf16(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t *a, int64_t lda,
		const uint16_t *b, int64_t ldb, float beta, float *c, int64_t ldc) {
	return zb_dnnl_bf16_p(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// loadOneDNN opens the first of names that loads (dlopen, so that nothing
// links against it) and returns gonum's implementation with oneDNN's SGEMM
// in place of its own and oneDNN's bfloat16 GEMM beside it, and the
// library's description. oneDNN's OpenMP runtime runs GOMAXPROCS threads
// unless OMP_NUM_THREADS says otherwise: the variable is set before the
// library, and with it libgomp, is loaded.
func loadOneDNN(names []string) (blas.Float32, string, error) {
	if os.Getenv("OMP_NUM_THREADS") == "" {
		if err := os.Setenv("OMP_NUM_THREADS", strconv.Itoa(runtime.GOMAXPROCS(0))); err != nil {
			return nil, "", fmt.Errorf("oneDNN's threads: %w", err)
		}
	}
	var errs []string
	for _, name := range names {
		cname := C.CString(name)
		var cerr *C.char
		var isa C.int
		v := C.zb_onednn(cname, &isa, &cerr)
		C.free(unsafe.Pointer(cname))
		if v != nil {
			detail := fmt.Sprintf("oneDNN %d.%d.%d isa=%s omp-threads=%s", v.major, v.minor, v.patch,
				oneDNNISA(int(isa)), os.Getenv("OMP_NUM_THREADS"))
			return oneDNNImpl{}, detail, nil
		}
		errs = append(errs, C.GoString(cerr))
	}
	return nil, "", fmt.Errorf("oneDNN cannot be loaded (%s; Debian: apt-get install libdnnl2): %w",
		strings.Join(errs, "; "), ErrEngine)
}

// oneDNNISA names a dnnl_cpu_isa_t value as oneDNN's documentation does.
func oneDNNISA(isa int) string {
	names := map[int]string{0x1: "sse41", 0x3: "avx", 0x7: "avx2", 0x407: "avx2_vnni", 0x27: "avx512_core",
		0x67: "avx512_core_vnni", 0xe7: "avx512_core_bf16", 0x3e7: "avx512_core_amx"}
	if s, ok := names[isa]; ok {
		return s
	}
	return fmt.Sprintf("%#x", isa)
}

// oneDNNImpl is gonum's BLAS with oneDNN's SGEMM, and oneDNN's bfloat16
// GEMM.
type oneDNNImpl struct{ gonum.Implementation }

// Sgemm computes c = alpha·op(a)·op(b) + beta·c in oneDNN. Degenerate
// calls, and arguments that do not describe the slices (which gonum
// reports with a panic), go to gonum.
func (o oneDNNImpl) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !sgemmArgsOK(tA, tB, m, n, k, alpha, a, lda, b, ldb, c, ldc) {
		o.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	st := C.zb_dnnl_sgemm(dnnlTrans(tA), dnnlTrans(tB), C.int64_t(m), C.int64_t(n), C.int64_t(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(&a[0])), C.int64_t(lda), (*C.float)(unsafe.Pointer(&b[0])), C.int64_t(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.int64_t(ldc))
	if st != 0 {
		panic(fmt.Sprintf("cpu: dnnl_sgemm(%c, %c, %d, %d, %d): status %d", tA, tB, m, n, k, st))
	}
}

// Bf16gemm computes c = alpha·op(a)·op(b) + beta·c with a and b in
// bfloat16 (as stored) and c in float32, in oneDNN: products exact,
// float32 accumulation. Its arguments are those of Sgemm.
func (o oneDNNImpl) Bf16gemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []uint16, lda int,
	b []uint16, ldb int, beta float32, c []float32, ldc int) {
	if !gemmArgsOK(tA, tB, m, n, k, alpha, len(a), lda, len(b), ldb, len(c), ldc) {
		widenedBf16gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	st := C.zb_dnnl_bf16(dnnlTrans(tA), dnnlTrans(tB), C.int64_t(m), C.int64_t(n), C.int64_t(k), C.float(alpha),
		(*C.uint16_t)(unsafe.Pointer(&a[0])), C.int64_t(lda), (*C.uint16_t)(unsafe.Pointer(&b[0])), C.int64_t(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.int64_t(ldc))
	if st != 0 {
		panic(fmt.Sprintf("cpu: dnnl_gemm_bf16bf16f32(%c, %c, %d, %d, %d): status %d", tA, tB, m, n, k, st))
	}
}

// dnnlTrans is oneDNN's code of a transpose.
func dnnlTrans(t blas.Transpose) C.char {
	if t == blas.NoTrans {
		return 'N'
	}
	return 'T'
}
