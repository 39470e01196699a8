package cpu

import "github.com/zbench/zbench/kernels/cpu/internal/sgemmasm"

// asmKernels are the assembly micro-kernels this CPU runs, best last:
// AVX2+FMA (6×16) and AVX-512F (12×32) on amd64, none elsewhere.
var asmKernels []sgemmKernel

func init() {
	if sgemmasm.Available {
		asmKernels = append(asmKernels, sgemmKernel{mr: 6, nr: 16, name: "avx2", fn: kernelAsm6x16})
	}
	if sgemmasm.Available512 {
		asmKernels = append(asmKernels, sgemmKernel{mr: 12, nr: 32, name: "avx512", fn: kernelAsm12x32, edge: kernelAsmEdge32})
	}
	if len(asmKernels) > 0 {
		sgemmMicro = asmKernels[len(asmKernels)-1]
	}
}

// kernelAsm6x16 is sgemmasm.Kernel6x16 on slices (see sgemmKernel).
func kernelAsm6x16(k int, a, b, c []float32, ldc int, alpha, beta float32, _ []float32) {
	_ = a[k*6-1]
	_ = b[k*16-1]
	_ = c[5*ldc+15]
	sgemmasm.Kernel6x16(k, &a[0], &b[0], &c[0], ldc, alpha, beta)
}

// kernelAsm12x32 is sgemmasm.Kernel12x32 on slices (see sgemmKernel).
func kernelAsm12x32(k int, a, b, c []float32, ldc int, alpha, beta float32, next []float32) {
	_ = a[k*12-1]
	_ = b[k*32-1]
	_ = c[11*ldc+31]
	sgemmasm.Kernel12x32(k, &a[0], &b[0], &c[0], ldc, alpha, beta, first(next))
}

// first is &s[0], or nil for an empty s.
func first[E float32 | uint32](s []E) *E {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// kernelAsmEdge32 is sgemmasm.KernelEdge8x32 (rows 8) or KernelEdge4x32
// (rows 4) on slices (see sgemmKernel).
func kernelAsmEdge32(rows, k int, a, b, c []float32, ldc int, alpha, beta float32) {
	_ = a[(k-1)*12+rows-1]
	_ = b[k*32-1]
	_ = c[(rows-1)*ldc+31]
	if rows == 8 {
		sgemmasm.KernelEdge8x32(k, &a[0], &b[0], &c[0], ldc, alpha, beta)
		return
	}
	sgemmasm.KernelEdge4x32(k, &a[0], &b[0], &c[0], ldc, alpha, beta)
}
