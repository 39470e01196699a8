//go:build cuda

package cuda

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// flashSmem is the dynamic shared memory of the flash-attention kernels by
// head dimension, and flashSM90Smem that of the Hopper ones.
var (
	flashSmem     = map[int]int{64: 49152, 128: 98304}
	flashSM90Smem = map[int]int{64: 148552, 128: 230456}
)

// FlashEnv is the environment variable that picks the flash-attention
// kernel on compute capability 9.0: "wgmma" for flash_attn_sm90_* (wgmma
// and TMA), anything else for the mma.sync kernel that every device from
// 8.0 runs. The choice is read once, by New, and reported as the device's
// DeviceInfo.Attention.
const FlashEnv = "ZBENCH_CUDA_FLASH"

// flashKind is the flash-attention kernel family a device of compute
// capability major.minor runs with env as FlashEnv's value: "wgmma",
// "mma", or "" where attention is composed of other operations.
func flashKind(major, minor int, env string) string {
	switch {
	case major == 9 && minor == 0 && env == "wgmma":
		return "wgmma"
	case major >= 8:
		return "mma"
	}
	return ""
}

// Attention computes softmax(scale·q·kᵀ + mask)·v. 16-bit inputs with head
// dimension 64 or 128 on compute capability 8.0 and newer run a fused
// flash-attention kernel (online softmax, nothing of size Sq·Sk in memory),
// on Hopper the wgmma one where FlashEnv asks for it; everything else is
// composed from MatMul and Softmax over a workspace.
func (b *Backend) Attention(out, q, k, v *kernels.Tensor, p kernels.AttentionParams) error {
	d, err := check.Attention("cuda: Attention", b, out, q, k, v, p)
	if err != nil {
		return err
	}
	if err := b.checkKeyLens(checkAttentionLens, p, d.Sk); err != nil {
		return wrap("Attention", err)
	}
	dt := q.DType()
	if smem, ok := flashSM90Smem[d.D]; ok && dt != kernels.F32 && b.info.Attention == "wgmma" {
		return wrap("Attention", b.flashSM90(out, q, k, v, d, p, smem))
	}
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

// flashSM90Specs returns the tensor maps of flash_attn_sm90_*
// (kernels/cuda/attention.cu) for q, k and v at the given addresses: each
// 3-D, {D, S, B·H} innermost first, read in boxes of 64 elements of D (the
// 128 bytes the 128-byte swizzle takes) by 128 rows of one head.
func flashSM90Specs(q, k, v devptr, d kernels.AttentionDims, es uint64) [3]tensorMapSpec {
	spec := func(base devptr, s, heads int) tensorMapSpec {
		dd := uint64(d.D)
		return tensorMapSpec{base, []uint64{dd, uint64(s), uint64(d.B) * uint64(heads)},
			[]uint64{dd * es, uint64(s) * dd * es}, []uint32{64, 128, 1}}
	}
	return [3]tensorMapSpec{spec(q, d.Sq, d.Hq), spec(k, d.Sk, d.Hkv), spec(v, d.Sk, d.Hkv)}
}

// flashSM90 runs Attention on flash_attn_sm90_*, smem bytes of shared
// memory, one CTA per 128 query rows of a head.
func (b *Backend) flashSM90(out, q, k, v *kernels.Tensor, d kernels.AttentionDims, p kernels.AttentionParams, smem int) error {
	dt := q.DType()
	specs := flashSM90Specs(ptrOf(q), ptrOf(k), ptrOf(v), d, uint64(dt.Size()))
	var maps [3]tensorMap
	var errs [3]error
	if err := b.call("cuTensorMapEncodeTiled", func() {
		for i, s := range specs {
			maps[i], errs[i] = encodeTensorMap(s.base, dt, s.dims, s.strides, s.box, true)
		}
	}); err != nil {
		return err
	}
	if err := errors.Join(errs[:]...); err != nil {
		return err
	}
	return b.launch(fmt.Sprintf("flash_attn_sm90_%s_d%d", dt, d.D),
		dim3{x: (d.Sq + 127) / 128, y: d.Hq, z: d.B}, dim3{x: 384}, smem,
		maps[0], maps[1], maps[2], ptrOf(out), int32(d.Hq), int32(d.Hkv), int32(d.Sq), int32(d.Sk),
		kernels.AttentionScale(p, d), int32(boolInt(p.Causal)), ptrOf(p.KeyLens))
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
