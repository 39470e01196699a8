//go:build cuda

package cuda

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// flashSmem is the dynamic shared memory of the flash-attention kernels by
// head dimension.
var flashSmem = map[int]int{64: 49152, 128: 98304}

// Attention computes softmax(scale·q·kᵀ + mask)·v. 16-bit inputs with head
// dimension 64 or 128 on compute capability 8.0 and newer run the fused
// flash-attention kernel (online softmax, nothing of size Sq·Sk in memory);
// everything else is composed from MatMul and Softmax over a workspace.
func (b *Backend) Attention(out, q, k, v *kernels.Tensor, p kernels.AttentionParams) error {
	d, err := check.Attention("cuda: Attention", b, out, q, k, v, p)
	if err != nil {
		return err
	}
	if err := b.checkKeyLens(checkAttentionLens, p, d.Sk); err != nil {
		return wrap("Attention", err)
	}
	dt := q.DType()
	if smem, ok := flashSmem[d.D]; ok && dt != kernels.F32 && b.major >= 8 {
		return wrap("Attention", b.launch(fmt.Sprintf("flash_attn_fwd_%s_d%d", dt, d.D),
			dim3{x: (d.Sq + 127) / 128, y: d.Hq, z: d.B}, dim3{x: 128}, smem,
			ptrOf(out), ptrOf(q), ptrOf(k), ptrOf(v), int32(d.B), int32(d.Hq), int32(d.Hkv), int32(d.Sq), int32(d.Sk),
			kernels.AttentionScale(p, d), int32(boolInt(p.Causal)), ptrOf(p.KeyLens)))
	}
	s, err := b.scratch(dt, 2, kernels.AttentionScratch(d))
	if err != nil {
		return wrap("Attention", err)
	}
	return wrap("Attention", kernels.AttentionByParts(b, out, q, k, v, [2]*kernels.Tensor{s[0], s[1]}, p, d))
}

// AttentionBackward computes dq, dk, dv by recomputing the probabilities
// and composing MatMul, Softmax and SoftmaxBackward over a workspace.
func (b *Backend) AttentionBackward(dq, dk, dv, dout, q, k, v *kernels.Tensor, p kernels.AttentionParams) error {
	d, err := check.AttentionBackward("cuda: AttentionBackward", b, dq, dk, dv, dout, q, k, v, p)
	if err != nil {
		return err
	}
	if err := b.checkKeyLens(checkAttentionBackwardLens, p, d.Sk); err != nil {
		return wrap("AttentionBackward", err)
	}
	s, err := b.scratch(q.DType(), 3, kernels.AttentionScratch(d))
	if err != nil {
		return wrap("AttentionBackward", err)
	}
	return wrap("AttentionBackward", kernels.AttentionBackwardByParts(b, dq, dk, dv, dout, q, k, v, [3]*kernels.Tensor{s[0], s[1], s[2]}, p, d))
}

// checkKeyLens queues the check that p.KeyLens lie in [0, sk].
func (b *Backend) checkKeyLens(c deviceCheck, p kernels.AttentionParams, sk int) error {
	if p.KeyLens == nil {
		return nil
	}
	return b.checkRange(c, p.KeyLens, 0, int32(sk)+1, -1, sk)
}

// scratch returns n tensors of elems elements of dt carved from the
// workspace, each 256-byte aligned. They are valid until the next
// operation that uses the workspace.
func (b *Backend) scratch(dt kernels.DType, n, elems int) ([]*kernels.Tensor, error) {
	size := (int64(elems)*int64(dt.Size()) + 255) &^ 255
	base, err := b.workspace(size * int64(n))
	if err != nil {
		return nil, err
	}
	ts := make([]*kernels.Tensor, n)
	for i := range ts {
		ts[i] = kernels.NewTensor(b, dt, kernels.Shape{elems}, &storage{ptr: base + devptr(int64(i)*size), class: -1})
	}
	return ts, nil
}
