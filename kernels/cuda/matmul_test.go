//go:build cuda

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

func TestSplitK(t *testing.T) {
	for _, c := range []struct {
		name                 string
		batch, m, n, k, sms  int
		wantSplits, wantDeep int
	}{
		{"BERT-base QKV at batch 1: 6 tiles", 1, 128, 768, 768, 132, 12, 64},
		{"BERT-base FFN in: 24 tiles", 1, 128, 3072, 768, 132, 5, 160},
		{"BERT-base FFN out: K 3072", 1, 128, 768, 3072, 132, 22, 144},
		{"uneven last slice", 1, 31, 17, 4097, 132, 57, 72},
		{"enough tiles to fill half the device", 1, 2048, 1024, 4096, 132, 1, 4096},
		{"a batch of products", 2, 128, 768, 768, 132, 1, 768},
		{"K too short to split", 1, 128, 768, 100, 132, 1, 100},
		{"no multiprocessors known", 1, 128, 768, 768, 0, 1, 768},
	} {
		t.Run(c.name, func(t *testing.T) {
			splits, deep := splitK(check.MatMulDims{Batch: c.batch, M: c.m, N: c.n, K: c.k}, c.sms)
			assert.Equal(t, c.wantSplits, splits)
			assert.Equal(t, c.wantDeep, deep)
			if splits > 1 {
				assert.Zero(t, deep%8, "slices start 8-aligned")
				assert.Less(t, (splits-1)*deep, c.k, "every slice holds some of K")
				assert.GreaterOrEqual(t, splits*deep, c.k, "the slices cover K")
			}
		})
	}
}

// TestMatMulSplitKLaunches checks, on a dry run, that a product of few
// tiles launches its slices and then the reduction over the partials
// arena with the product's epilogue, and that the arena is kept for the
// next product.
func TestMatMulSplitKLaunches(t *testing.T) {
	var recs []launchRec
	b := dryRun(9, 0, &recs)
	a := func(shape ...int) *kernels.Tensor {
		x, err := b.Alloc(kernels.F32, shape...)
		require.NoError(t, err)
		return x
	}
	out, x, w, bias := a(128, 768), a(128, 3072), a(768, 3072), a(768)
	p := kernels.MatMulParams{TransB: true, Bias: bias, Alpha: 0.5, Beta: 1, Act: kernels.ActGELU}
	require.NoError(t, b.MatMul(out, x, w, p))
	require.Len(t, recs, 2)
	part, red := recs[0], recs[1]
	assert.Equal(t, "matmul_splitk_f32", part.name)
	assert.Equal(t, dim3{x: 6, y: 1, z: 22}, part.grid)
	assert.Equal(t, []any{b.partials.cur, ptrOf(x), ptrOf(w), int32(128), int32(768), int32(3072), int32(0), int32(1), int32(144)}, part.args)
	assert.GreaterOrEqual(t, b.partials.bytes, int64(22*128*768*4))
	assert.Equal(t, "splitk_reduce_f32", red.name)
	assert.Equal(t, []any{ptrOf(out), b.partials.cur, ptrOf(bias), int32(128), int32(768), int32(22), float32(0.5), float32(1), int32(kernels.ActGELU)}, red.args)

	arena := b.partials
	recs = recs[:0]
	require.NoError(t, b.MatMul(a(128, 768), a(128, 768), a(768, 768), kernels.MatMulParams{TransB: true}))
	require.Len(t, recs, 2)
	assert.Equal(t, arena, b.partials, "a smaller product reuses the arena")
}
