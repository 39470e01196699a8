//go:build cuda

package cuda

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// flashSmem is the dynamic shared memory of the flash-attention kernels
// by family (DeviceInfo.Attention) and head dimension.
var flashSmem = map[string]map[int]int{
	"mma":   {64: 49152, 128: 98304},
	"wgmma": {64: 148552, 128: 230456},
}

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
	dt := q.DType()
	if ok, err := b.flash(contiguousLayout(ptrOf(out), ptrOf(q), ptrOf(k), ptrOf(v), d), dt, d, p, checkAttentionLens); ok {
		return wrap("Attention", err)
	}
	if err := b.checkKeyLens(checkAttentionLens, p, d.Sk); err != nil {
		return wrap("Attention", err)
	}
	return wrap("Attention", b.attentionByParts(out, q, k, v, d, p))
}

// AttentionPacked computes Attention over a fused projection: the flash
// kernels read the heads of qkv and write those of out where they lie;
// otherwise split_heads copies them into [B, H, S, D] tensors from the
// pool, attention is composed over those, and SwapAxes merges its heads
// into out.
func (b *Backend) AttentionPacked(out, qkv *kernels.Tensor, p kernels.AttentionParams) error {
	d, err := check.AttentionPacked("cuda: AttentionPacked", b, out, qkv, p)
	if err != nil {
		return err
	}
	dt := qkv.DType()
	if ok, err := b.flash(packedLayout(ptrOf(out), ptrOf(qkv), d, int64(dt.Size())), dt, d, p, checkAttentionPackedLens); ok {
		return wrap("AttentionPacked", err)
	}
	if err := b.checkKeyLens(checkAttentionPackedLens, p, d.Sk); err != nil {
		return wrap("AttentionPacked", err)
	}
	return wrap("AttentionPacked", b.attentionPackedByParts(out, qkv, d, p))
}

// attentionByParts composes attention from MatMul and Softmax over the
// workspace.
func (b *Backend) attentionByParts(out, q, k, v *kernels.Tensor, d kernels.AttentionDims, p kernels.AttentionParams) error {
	s, err := b.scratch(q.DType(), 2, kernels.AttentionScratch(d))
	if err != nil {
		return err
	}
	return kernels.AttentionByParts(b, out, q, k, v, [2]*kernels.Tensor{s[0], s[1]}, p, d)
}

// attentionPackedByParts is AttentionPacked where no flash kernel runs.
func (b *Backend) attentionPackedByParts(out, qkv *kernels.Tensor, d kernels.AttentionDims, p kernels.AttentionParams) (err error) {
	dt := qkv.DType()
	var ts [4]*kernels.Tensor // q, k, v and the heads of out
	for i, h := range [4]int{d.Hq, d.Hkv, d.Hkv, d.Hq} {
		if ts[i], err = b.Alloc(dt, d.B, h, d.Sq, d.D); err != nil {
			break
		}
	}
	defer func() {
		for _, t := range ts {
			if t != nil {
				err = errors.Join(err, b.Free(t))
			}
		}
	}()
	if err != nil {
		return err
	}
	row := int64(d.D) * int64(dt.Size())
	unit := moveUnit(row, ptrOf(qkv), ptrOf(ts[0]), ptrOf(ts[1]), ptrOf(ts[2]))
	du := row / unit
	n := int64(d.B) * int64(d.Sq) * int64(d.Hq+2*d.Hkv) * du
	if err := b.launch(fmt.Sprintf("split_heads_u%d", 8*unit), b.gridFor(n), dim3{x: block}, 0,
		ptrOf(ts[0]), ptrOf(ts[1]), ptrOf(ts[2]), ptrOf(qkv), int64(d.B), int64(d.Sq), int64(d.Hq), int64(d.Hkv), du); err != nil {
		return err
	}
	if err := b.attentionByParts(ts[3], ts[0], ts[1], ts[2], d, p); err != nil {
		return err
	}
	return b.SwapAxes(out, ts[3])
}

// attnLayout is where the rows of attention's q, k, v and out lie: their
// addresses and, in elements, the strides between consecutive rows
// (positions), heads and batch entries of q, of k and v, and of out (the
// flash kernels' AttnStrides).
type attnLayout struct {
	out, q, k, v           devptr
	qRow, qHead, qBatch    int64
	kvRow, kvHead, kvBatch int64
	oRow, oHead, oBatch    int64
}

// contiguousLayout is the layout of Attention's [B, H, S, D] tensors.
func contiguousLayout(out, q, k, v devptr, d kernels.AttentionDims) attnLayout {
	dd, sq, sk := int64(d.D), int64(d.Sq), int64(d.Sk)
	return attnLayout{out: out, q: q, k: k, v: v,
		qRow: dd, qHead: sq * dd, qBatch: int64(d.Hq) * sq * dd,
		kvRow: dd, kvHead: sk * dd, kvBatch: int64(d.Hkv) * sk * dd,
		oRow: dd, oHead: sq * dd, oBatch: int64(d.Hq) * sq * dd}
}

// packedLayout is the layout of AttentionPacked's qkv [B, S, Hq+2·Hkv, D]
// at qkv, elements of es bytes, and out [B, S, Hq, D].
func packedLayout(out, qkv devptr, d kernels.AttentionDims, es int64) attnLayout {
	dd, s, h, hq := int64(d.D), int64(d.Sq), int64(d.Hq+2*d.Hkv), int64(d.Hq)
	return attnLayout{out: out, q: qkv, k: qkv + devptr(hq*dd*es), v: qkv + devptr((hq+int64(d.Hkv))*dd*es),
		qRow: h * dd, qHead: dd, qBatch: s * h * dd,
		kvRow: h * dd, kvHead: dd, kvBatch: s * h * dd,
		oRow: hq * dd, oHead: dd, oBatch: s * hq * dd}
}

// flash runs attention over l on a flash-attention kernel and reports
// whether one takes the call: 16-bit, head dimension 64 or 128, compute
// capability 8.0 and newer (flash_attn_fwd_*), or flash_attn_sm90_* on
// Hopper where FlashEnv chose it. The kernel reports a key length outside
// [0, Sk] in check c's record itself.
func (b *Backend) flash(l attnLayout, dt kernels.DType, d kernels.AttentionDims, p kernels.AttentionParams, c deviceCheck) (bool, error) {
	smem, ok := flashSmem[b.info.Attention][d.D]
	if dt == kernels.F32 || !ok {
		return false, nil
	}
	var lensErr devptr
	if p.KeyLens != nil {
		lensErr = b.errorSlot(c, d.Sk)
	}
	grid := dim3{x: (d.Sq + 127) / 128, y: d.Hq, z: d.B}
	if b.info.Attention == "wgmma" {
		return true, b.flashSM90(l, dt, d, p, grid, smem, lensErr)
	}
	return true, b.launch(fmt.Sprintf("flash_attn_fwd_%s_d%d", dt, d.D), grid, dim3{x: 128}, smem,
		l.out, l.q, l.k, l.v, l.qRow, l.qHead, l.qBatch, l.kvRow, l.kvHead, l.kvBatch, l.oRow, l.oHead, l.oBatch,
		int32(d.Hq), int32(d.Hkv), int32(d.Sq), int32(d.Sk), kernels.AttentionScale(p, d), int32(boolInt(p.Causal)),
		ptrOf(p.KeyLens), lensErr)
}

// flashSM90Specs returns the tensor maps of flash_attn_sm90_*
// (kernels/cuda/attention.cu) for l, elements of es bytes: each 4-D, {D, S,
// heads, B} innermost first at l's strides, read in boxes of 64 elements of
// D (the 128 bytes the 128-byte swizzle takes) by 128 rows of one head.
func flashSM90Specs(l attnLayout, d kernels.AttentionDims, es uint64) [3]tensorMapSpec {
	spec := func(base devptr, s, heads int, row, head, batch int64) tensorMapSpec {
		return tensorMapSpec{base, []uint64{uint64(d.D), uint64(s), uint64(heads), uint64(d.B)},
			[]uint64{uint64(row) * es, uint64(head) * es, uint64(batch) * es}, []uint32{64, 128, 1, 1}}
	}
	return [3]tensorMapSpec{
		spec(l.q, d.Sq, d.Hq, l.qRow, l.qHead, l.qBatch),
		spec(l.k, d.Sk, d.Hkv, l.kvRow, l.kvHead, l.kvBatch),
		spec(l.v, d.Sk, d.Hkv, l.kvRow, l.kvHead, l.kvBatch),
	}
}

// flashSM90 runs attention over l on flash_attn_sm90_*, smem bytes of
// shared memory, one CTA of grid per 128 query rows of a head.
func (b *Backend) flashSM90(l attnLayout, dt kernels.DType, d kernels.AttentionDims, p kernels.AttentionParams, grid dim3, smem int, lensErr devptr) error {
	specs := flashSM90Specs(l, d, uint64(dt.Size()))
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
	return b.launch(fmt.Sprintf("flash_attn_sm90_%s_d%d", dt, d.D), grid, dim3{x: 384}, smem,
		maps[0], maps[1], maps[2], l.out, l.oRow, l.oHead, l.oBatch, int32(d.Hq), int32(d.Hkv), int32(d.Sq), int32(d.Sk),
		kernels.AttentionScale(p, d), int32(boolInt(p.Causal)), ptrOf(p.KeyLens), lensErr)
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
