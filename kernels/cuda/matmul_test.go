//go:build cuda

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// TestSplitK checks the slices of K of the SIMT kernel (128×128 tiles,
// slices of 8 and at least 64 deep) and the Hopper kernel (128×256 tiles,
// whole 64-deep k-tiles, at least four).
func TestSplitK(t *testing.T) {
	for _, c := range []struct {
		name                 string
		g                    splitTile
		batch, m, n, k, sms  int
		wantSplits, wantDeep int
	}{
		{"BERT-base QKV at batch 1: 6 tiles", simtSplit, 1, 128, 768, 768, 132, 12, 64},
		{"BERT-base FFN in: 24 tiles", simtSplit, 1, 128, 3072, 768, 132, 5, 160},
		{"BERT-base FFN out: K 3072", simtSplit, 1, 128, 768, 3072, 132, 22, 144},
		{"uneven last slice", simtSplit, 1, 31, 17, 4097, 132, 57, 72},
		{"enough tiles to fill half the device", simtSplit, 1, 2048, 1024, 4096, 132, 1, 4096},
		{"a batch of products", simtSplit, 2, 128, 768, 768, 132, 1, 768},
		{"K too short to split", simtSplit, 1, 128, 768, 100, 132, 1, 100},
		{"no multiprocessors known", simtSplit, 1, 128, 768, 768, 0, 1, 768},
		{"Hopper: BERT-base attention output at batch 1, 3 tiles", sm90Split, 1, 128, 768, 768, 132, 3, 256},
		{"Hopper: BERT-base FFN out, K 3072", sm90Split, 1, 128, 768, 3072, 132, 12, 256},
		{"Hopper: TinyLlama k_proj, prefill of 512, 4 tiles", sm90Split, 1, 512, 256, 2048, 132, 8, 256},
		{"Hopper: TinyLlama down_proj, prefill of 512, 32 tiles", sm90Split, 1, 512, 2048, 5632, 132, 4, 1408},
		{"Hopper: TinyLlama gate_proj, prefill of 512, 88 tiles", sm90Split, 1, 512, 5632, 2048, 132, 1, 2048},
		{"Hopper: K of one slice's depth", sm90Split, 1, 128, 768, 256, 132, 1, 256},
		{"Hopper: K not a multiple of 64", sm90Split, 1, 128, 768, 1000, 132, 3, 384},
	} {
		t.Run(c.name, func(t *testing.T) {
			splits, deep := c.g.splitK(check.MatMulDims{Batch: c.batch, M: c.m, N: c.n, K: c.k}, c.sms)
			assert.Equal(t, c.wantSplits, splits)
			assert.Equal(t, c.wantDeep, deep)
			if splits > 1 {
				assert.Zero(t, deep%c.g.step, "slices start at a multiple of the step")
				assert.Less(t, (splits-1)*deep, c.k, "every slice holds some of K")
				assert.GreaterOrEqual(t, splits*deep, c.k, "the slices cover K")
			}
		})
	}
}

// allocator returns a function that allocates tensors of dt on b.
func allocator(t *testing.T, b *Backend, dt kernels.DType) func(shape ...int) *kernels.Tensor {
	return func(shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
}

// TestMatMulSplitKLaunches checks, on a dry run of a Hopper device, that a
// product of few tiles (BERT's FFN output at batch 1) launches its slices
// into the partials arena (the SIMT kernel for f32, the Hopper kernel for
// 16-bit) and then the reduction with the product's epilogue, that the
// arena is kept for a smaller product, and that a product of many tiles
// runs whole.
func TestMatMulSplitKLaunches(t *testing.T) {
	for _, c := range []struct {
		dt             kernels.DType
		kernel, reduce string
		grid           dim3
		splits         int
		argsTail       func(b *Backend) []any
		wholeGrid      dim3
	}{
		{kernels.F32, "matmul_splitk_f32", "splitk_reduce_f32", dim3{x: 6, y: 1, z: 22}, 22,
			func(b *Backend) []any { return []any{int32(0), int32(1), int32(144)} }, dim3{x: 6, y: 32, z: 1}},
		{kernels.BF16, "matmul_sm90_bf16", "splitk_reduce_bf16", dim3{x: 3, y: 1, z: 12}, 12,
			func(b *Backend) []any { return []any{b.partials.cur, int32(256)} }, dim3{x: 96, y: 1, z: 1}},
	} {
		t.Run(c.dt.String(), func(t *testing.T) {
			var recs []launchRec
			b := dryRun(9, 0, &recs)
			a := allocator(t, b, c.dt)
			out, x, w, bias := a(128, 768), a(128, 3072), a(768, 3072), a(768)
			p := kernels.MatMulParams{TransB: true, Bias: bias, Alpha: 0.5, Beta: 1, Act: kernels.ActGELU}
			require.NoError(t, b.MatMul(out, x, w, p))
			require.Len(t, recs, 2)
			part, red := recs[0], recs[1]
			assert.Equal(t, c.kernel, part.name)
			assert.Equal(t, c.grid, part.grid)
			tail := c.argsTail(b)
			assert.Equal(t, tail, part.args[len(part.args)-len(tail):])
			assert.Contains(t, part.args, any(b.partials.cur), "the slices write the partials arena")
			assert.GreaterOrEqual(t, b.partials.bytes, int64(c.splits*128*768*4))
			assert.Equal(t, c.reduce, red.name)
			assert.Equal(t, []any{ptrOf(out), b.partials.cur, ptrOf(bias), int32(128), int32(768), int32(c.splits), float32(0.5), float32(1), int32(kernels.ActGELU)}, red.args)

			arena := b.partials
			recs = recs[:0]
			require.NoError(t, b.MatMul(a(128, 768), a(128, 768), a(768, 768), kernels.MatMulParams{TransB: true}))
			require.Len(t, recs, 2)
			assert.Equal(t, arena, b.partials, "a smaller product reuses the arena")

			recs = recs[:0]
			require.NoError(t, b.MatMul(a(4096, 768), a(4096, 768), a(768, 768), kernels.MatMulParams{TransB: true}))
			require.Len(t, recs, 1)
			assert.Equal(t, c.wholeGrid, recs[0].grid)
		})
	}
}

// TestMatMulSM90TF32Launches checks, on a dry run of a Hopper device, that
// a TF32 product of B [K, N] transposes B into its arena first and gives
// the Hopper kernel that copy, that B [N, K] goes straight to it, and that
// a batch of Bs [K, N] is left to the mma.sync kernel.
func TestMatMulSM90TF32Launches(t *testing.T) {
	var recs []launchRec
	b := dryRun(9, 0, &recs)
	a := allocator(t, b, kernels.F32)
	out, x, w := a(4096, 1024), a(4096, 512), a(512, 1024)
	require.NoError(t, b.MatMul(out, x, w, kernels.MatMulParams{TF32: true}))
	require.Len(t, recs, 2)
	tr, mm := recs[0], recs[1]
	assert.Equal(t, "transpose_u32", tr.name)
	assert.Equal(t, dim3{x: 32, y: 16, z: 1}, tr.grid)
	assert.Equal(t, []any{b.transB.cur, ptrOf(w), int32(512), int32(1024)}, tr.args)
	assert.GreaterOrEqual(t, b.transB.bytes, int64(512*1024*4))
	assert.Equal(t, "matmul_sm90_tf32", mm.name)
	assert.Equal(t, dim3{x: 32 * 4, y: 1, z: 1}, mm.grid)
	assert.Equal(t, int32(1), mm.args[7], "transB")

	recs = recs[:0]
	require.NoError(t, b.MatMul(out, x, a(1024, 512), kernels.MatMulParams{TF32: true, TransB: true}))
	require.Len(t, recs, 1)
	assert.Equal(t, "matmul_sm90_tf32", recs[0].name)

	recs = recs[:0]
	require.NoError(t, b.MatMul(a(2, 256, 256), a(2, 256, 256), a(2, 256, 256), kernels.MatMulParams{TF32: true}))
	require.Len(t, recs, 1)
	assert.Equal(t, "matmul_tf32", recs[0].name)
}
