//go:build cuda

package cuda

import (
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

var _ kernels.DecoderBackward = (*Backend)(nil)

// rmsNormBackwardParts is the number of blocks of rmsnorm_backward, and so
// of dgamma's partial sums: at most two per multiprocessor, at most one per
// row. It depends only on the device and the call's shape, so dgamma is
// the same on every run.
func (b *Backend) rmsNormBackwardParts(rows int) int { return max(1, min(rows, 2*b.info.Cores)) }

// RMSNormBackward computes dx with one block per row and, when dgamma is
// not nil, the blocks' partial sums of dgamma in the workspace, added up
// in block order by norm.cu's layernorm_param_grads (deterministic, no
// atomics).
func (b *Backend) RMSNormBackward(dx, dgamma, dy, x, gamma *kernels.Tensor, eps float32) error {
	d, err := check.RMSNormBackward("cuda: RMSNormBackward", b, dx, dgamma, dy, x, gamma, eps)
	if err != nil {
		return err
	}
	sfx := dx.DType().String()
	parts := b.rmsNormBackwardParts(d.Rows)
	var part devptr
	if dgamma != nil {
		if part, err = b.workspace(int64(parts) * int64(d.D) * 4); err != nil {
			return wrap("RMSNormBackward", err)
		}
	}
	if err := b.launch("rmsnorm_backward_"+sfx, dim3{x: parts}, dim3{x: block}, 0,
		ptrOf(dx), part, ptrOf(dy), ptrOf(x), ptrOf(gamma), int32(d.Rows), int32(d.D), eps); err != nil {
		return wrap("RMSNormBackward", err)
	}
	if dgamma == nil {
		return nil
	}
	return wrap("RMSNormBackward", b.launch("layernorm_param_grads_"+sfx, dim3{x: (d.D + block - 1) / block}, dim3{x: block}, 0,
		ptrOf(dgamma), devptr(0), part, devptr(0), int32(parts), int32(d.D)))
}

// SwiGLUBackward sets dgate = dy·up·silu'(gate) and dup = dy·silu(gate) in
// one elementwise pass.
func (b *Backend) SwiGLUBackward(dgate, dup, dy, gate, up *kernels.Tensor) error {
	n, err := check.SwiGLUBackward("cuda: SwiGLUBackward", b, dgate, dup, dy, gate, up)
	if err != nil {
		return err
	}
	return wrap("SwiGLUBackward", b.launch("swiglu_backward_"+dgate.DType().String(), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(dgate), ptrOf(dup), ptrOf(dy), ptrOf(gate), ptrOf(up), int64(n)))
}

// Dropout sets out = x·s where kernels.DropoutKeep(seed, i, p), else 0,
// regenerating the mask on the device from the seed.
func (b *Backend) Dropout(out, x *kernels.Tensor, p float32, seed uint64) error {
	n, err := check.Dropout("cuda: Dropout", b, out, x, p)
	if err != nil {
		return err
	}
	return wrap("Dropout", b.launch("dropout_"+out.DType().String(), b.gridFor(int64(n)), dim3{x: block}, 0,
		ptrOf(out), ptrOf(x), int64(n), p, kernels.DropoutScale(p), int64(seed))) // the seed's bits as the kernel's u64
}
