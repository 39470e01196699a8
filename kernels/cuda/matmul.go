//go:build cuda

package cuda

import "github.com/zbench/zbench/kernels"

// tcSmem is the dynamic shared memory of the mma.sync kernels
// (matmul_tc_f16, matmul_tc_bf16, matmul_tf32): a 4-stage pipeline.
const tcSmem = 81920

// MatMul sets out = act(alpha·op(a)·op(b) + beta·out + bias). It picks, in
// order: the Hopper wgmma/TMA kernel (16-bit, compute capability 9.0), the
// mma.sync tensor-core kernels (16-bit, or F32 with p.TF32, from 8.0), and
// the SIMT kernel, which takes every shape on every device.
func (b *Backend) MatMul(out, a, bm *kernels.Tensor, p kernels.MatMulParams) error {
	d, err := kernels.CheckMatMul("cuda: matmul", b, out, a, bm, p)
	if err != nil {
		return err
	}
	dt := out.DType()
	if dt != kernels.F32 && b.major == 9 && b.minor == 0 && d.K > 0 {
		ok, err := b.matmulSM90(out, a, bm, d, p)
		if ok || err != nil {
			return wrap("matmul", err)
		}
	}
	// The SIMT kernel: 256 threads; it also takes K = 0 (the epilogue alone).
	name, threads, smem := "matmul_"+suffix(dt), 256, 0
	if b.major >= 8 && d.K > 0 && tensorCoreFits(d, dt, p.TF32) {
		name, threads, smem = "matmul_tc_"+suffix(dt), 128, tcSmem
		if dt == kernels.F32 {
			name = "matmul_tf32"
		}
	}
	alpha := p.Alpha
	if alpha == 0 {
		alpha = 1
	}
	strideB := int64(d.K) * int64(d.N)
	if d.SharedB {
		strideB = 0
	}
	return wrap("matmul", b.launch(name, dim3{x: (d.N + 127) / 128, y: (d.M + 127) / 128, z: d.Batch}, dim3{x: threads}, smem,
		ptrOf(out), ptrOf(a), ptrOf(bm), ptrOf(p.Bias), int32(d.M), int32(d.N), int32(d.K),
		int32(boolInt(p.TransA)), int32(boolInt(p.TransB)),
		int64(d.M)*int64(d.K), strideB, int64(d.M)*int64(d.N), alpha, p.Beta, int32(p.Act)))
}

// tensorCoreFits reports whether the mma.sync kernels take these sizes:
// 16-bit types need M, N, K multiples of 8, TF32 multiples of 4 (so that
// every row and every batch's matrix is 16-byte aligned; the pool's
// blocks are 256-byte aligned). F32 without TF32 never does.
func tensorCoreFits(d kernels.MatMulDims, dt kernels.DType, tf32 bool) bool {
	q := 8
	if dt == kernels.F32 {
		if !tf32 {
			return false
		}
		q = 4
	}
	return d.M%q == 0 && d.N%q == 0 && d.K%q == 0
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}
