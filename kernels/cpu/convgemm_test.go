package cpu

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
)

func TestConvTasks(t *testing.T) {
	for _, c := range []struct {
		name                          string
		groups, m, cog, mr, nr, procs int
		inPlaceRows                   bool
		want                          []convTask
	}{
		{"one worker", 1, 3136, 64, 12, 32, 1, false, []convTask{{0, 0, 3136, 0, 64}}},
		{"pixels split in whole panels", 1, 784, 128, 12, 32, 2, false,
			[]convTask{{0, 0, 396, 0, 128}, {0, 396, 784, 0, 128}}},
		{"few pixels: filters split", 1, 49, 512, 12, 32, 2, false,
			[]convTask{{0, 0, 49, 0, 256}, {0, 0, 49, 256, 512}}},
		{"few pixels, fewer filters than workers", 1, 25, 80, 12, 32, 4, false,
			[]convTask{{0, 0, 25, 0, 32}, {0, 0, 25, 32, 64}, {0, 0, 25, 64, 80}}},
		{"few pixels, filters for half the workers", 1, 30, 64, 12, 32, 4, false,
			[]convTask{{0, 0, 12, 0, 32}, {0, 0, 12, 32, 64}, {0, 12, 30, 0, 32}, {0, 12, 30, 32, 64}}},
		{"a group per worker", 2, 100, 48, 12, 32, 2, false,
			[]convTask{{0, 0, 100, 0, 48}, {1, 0, 100, 0, 48}}},
		{"one panel", 1, 5, 7, 12, 32, 2, false, []convTask{{0, 0, 5, 0, 7}}},
		{"pixels in place, more filters than pixels: filters split", 1, 196, 1024, 12, 32, 2, true,
			[]convTask{{0, 0, 196, 0, 512}, {0, 0, 196, 512, 1024}}},
		{"packed pixels, more filters than pixels: pixels split", 1, 196, 1024, 12, 32, 2, false,
			[]convTask{{0, 0, 96, 0, 1024}, {0, 96, 196, 0, 1024}}},
		{"pixels in place, more pixels than filters: pixels split", 1, 784, 512, 12, 32, 2, true,
			[]convTask{{0, 0, 396, 0, 512}, {0, 396, 784, 0, 512}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, convTasks(c.groups, c.m, c.cog, c.mr, c.nr, c.procs, c.inPlaceRows))
		})
	}
}

// TestPackedFiltersSameBits checks that Conv2D reads the packed filters
// (the same products in the same order: the same bits as unpacked) and
// that Upload and Free drop them; on an engine other than our SGEMM, that
// PackConvFilters packs nothing and Conv2D gives the same bits.
func TestPackedFiltersSameBits(t *testing.T) {
	be := New()
	x, err := kernels.FromFloat32(be, kernels.F32, seq(2*9*7*40, 0.37), 2, 9, 7, 40)
	require.NoError(t, err)
	w, err := kernels.FromFloat32(be, kernels.F32, seq(96*3*3*40, 0.11), 96, 3, 3, 40)
	require.NoError(t, err)
	bias, err := kernels.FromFloat32(be, kernels.F32, seq(96, 0.5), 96)
	require.NoError(t, err)
	out, err := be.Alloc(kernels.F32, 2, 9, 7, 96)
	require.NoError(t, err)
	p := kernels.ConvParams{Pad: [2]int{1, 1}, Bias: bias, Act: kernels.ActReLU}
	conv := func() []float32 {
		require.NoError(t, be.Conv2D(out, x, w, p))
		return slices.Clone(f32(out))
	}
	want := conv()
	require.NoError(t, be.PackConvFilters(w, 1))
	if !ownSGEMM() {
		require.Nil(t, w.Storage().(*storage).packed, "packed for an engine that does not read them")
		require.Equal(t, want, conv())
		return
	}
	require.NotNil(t, w.Storage().(*storage).packed)
	require.Equal(t, want, conv())
	require.NoError(t, kernels.UploadFloat32(w, seq(w.Len(), 0.11)))
	require.Nil(t, w.Storage().(*storage).packed, "Upload drops the packed filters")
	before := be.MemStats().CurrentBytes
	require.NoError(t, be.PackConvFilters(w, 1))
	packed := be.MemStats().CurrentBytes - before
	assert.GreaterOrEqual(t, packed, w.Bytes(), "the packed filters are pool memory (96 filters of 360: as many as w)")
	st, wb := w.Storage().(*storage), w.Bytes()
	require.NoError(t, be.Free(w))
	require.Nil(t, st.packed, "Free drops the packed filters")
	assert.Equal(t, before-wb, be.MemStats().CurrentBytes, "Free returns w and its packed form")
}

// TestPackedLinearSameBits checks that MatMul reads a weight packed by
// PackLinear (the same products in the same order: the same bits as
// unpacked), in float32, float16 (widened once) and bfloat16 (pairs for
// our bfloat16 GEMM), for rows split across workers, for columns split
// and for an odd K over two blocks, and that Upload drops the packed
// form; on an engine that would not read it, that PackLinear packs
// nothing.
func TestPackedLinearSameBits(t *testing.T) {
	be := New()
	for _, dt := range kernels.FloatTypes {
		for _, d := range [][3]int{{128, 768, 768}, {24, 3072, 300}, {40, 100, 257}} {
			m, n, k := d[0], d[1], d[2]
			x, err := kernels.FromFloat32(be, dt, seq(m*k, 0.37), m, k)
			require.NoError(t, err)
			w, err := kernels.FromFloat32(be, dt, seq(n*k, 0.11), n, k)
			require.NoError(t, err)
			out, err := be.Alloc(dt, m, n)
			require.NoError(t, err)
			mm := func() []float32 {
				require.NoError(t, be.MatMul(out, x, w, kernels.MatMulParams{TransB: true}))
				v, err := kernels.ToFloat32(out)
				require.NoError(t, err)
				return v
			}
			want := mm()
			require.NoError(t, be.PackLinear(w))
			packs := ownSGEMM()
			if dt == kernels.BF16 {
				_, packs = be.bf16.(bf16Gemm)
			}
			if !packs {
				require.Nil(t, w.Storage().(*storage).packed, "packed for an engine that does not read them")
			} else {
				require.NotNil(t, w.Storage().(*storage).packed)
			}
			require.Equal(t, want, mm(), "%v %v", dt, d)
			require.NoError(t, kernels.UploadFloat32(w, seq(w.Len(), 0.11)))
			require.Nil(t, w.Storage().(*storage).packed, "Upload drops the packed weight")
			for _, tt := range []*kernels.Tensor{x, w, out} {
				require.NoError(t, be.Free(tt))
			}
		}
	}
}

// seq is n values cycling through [-1, 1) in steps of step.
func seq(n int, step float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Mod(float64(i)*step, 2) - 1)
	}
	return v
}
