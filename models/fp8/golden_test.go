package fp8_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/internal/golden"
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/fp8"
)

// goldenMeta is a case's metadata in testdata/golden/fp8.safetensors,
// written by testdata/reference/fp8.py.
type goldenMeta struct {
	Op         string `json:"op"`
	Format     string `json:"format"`
	HistoryLen int    `json:"amax_history_len"`
	Algo       string `json:"amax_compute_algo"`
	Margin     int    `json:"margin"`
	Fused      bool   `json:"fused"`
	Block      []int  `json:"block"`
}

// openGolden opens the golden file and decodes its cases' metadata.
func openGolden(t *testing.T) (*golden.File, map[string]goldenMeta) {
	t.Helper()
	g := golden.Require(t, "fp8", "testdata/reference/fp8.py")
	return g, golden.RequireCases[goldenMeta](t, g)
}

// formats are the golden's names of the FP8 dtypes.
var formats = map[string]kernels.DType{"e4m3": kernels.E4M3, "e5m2": kernels.E5M2}

// TestGoldenDelayedScaling replays each golden amax sequence through Meta
// and requires, bit for bit, the scale each step casts with and the scale
// after its update: Transformer Engine's fused update, and its Python one.
func TestGoldenDelayedScaling(t *testing.T) {
	g, meta := openGolden(t)
	f32 := func(t *testing.T, name, role string) []float32 { v, _ := g.RequireF32(t, name, role); return v }
	names := g.RequireOp(t, "delayed_scaling")
	require.Len(t, names, 5)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := meta[name]
			m, err := fp8.DelayedScaling{Margin: c.Margin, AmaxHistoryLen: c.HistoryLen, AmaxComputeAlgo: c.Algo, Unfused: !c.Fused}.NewMeta(formats[c.Format])
			require.NoError(t, err)
			amax, scale, next := f32(t, name, "amax"), f32(t, name, "scale"), f32(t, name, "scale_next")
			for step, a := range amax {
				require.Equal(t, math.Float32bits(scale[step]), math.Float32bits(m.Scale()), "step %d: scale %v, want %v", step, m.Scale(), scale[step])
				m.Record(a)
				m.Update()
				require.Equal(t, math.Float32bits(next[step]), math.Float32bits(m.Scale()), "step %d (amax %v): next scale %v, want %v", step, a, m.Scale(), next[step])
			}
		})
	}
}

// TestGoldenCurrentScaling checks CurrentScale and the cast it drives
// (the CPU backend's CastFP8 with its fused amax) against the golden's
// scale, inverse, amax and codes, bit for bit.
func TestGoldenCurrentScaling(t *testing.T) {
	g, meta := openGolden(t)
	f32 := func(t *testing.T, name, role string) []float32 { v, _ := g.RequireF32(t, name, role); return v }
	names := g.RequireOp(t, "current_scaling")
	require.NotEmpty(t, names)
	be := cpu.New()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			dt := formats[meta[name].Format]
			x := f32(t, name, "x")
			xt, err := kernels.FromFloat32(be, kernels.F32, x, len(x))
			require.NoError(t, err)
			q, err := be.Alloc(dt, len(x))
			require.NoError(t, err)
			amax, err := be.Alloc(kernels.F32, 1)
			require.NoError(t, err)
			var a float32
			for _, v := range x {
				a = max(a, float32(math.Abs(float64(v))))
			}
			s := fp8.CurrentScale(a, dt)
			assert.Equal(t, f32(t, name, "amax"), []float32{a})
			assert.Equal(t, f32(t, name, "scale"), []float32{s})
			assert.Equal(t, f32(t, name, "scale_inv"), []float32{1 / s})
			st, err := kernels.FromFloat32(be, kernels.F32, []float32{s}, 1)
			require.NoError(t, err)
			require.NoError(t, be.CastFP8(q, amax, xt, st))
			got := make([]byte, len(x))
			require.NoError(t, be.Download(got, q))
			assert.Equal(t, g.RequireRaw(t, name, "codes", "U8").Data, got)
			av, err := kernels.ToFloat32(amax)
			require.NoError(t, err)
			assert.Equal(t, a, av[0], "the cast's fused amax")
		})
	}
}

// TestGoldenBlockScaling checks QuantizeBlocks on DeepSeek-V3's 1×128
// activation and 128×128 weight blocks against the golden, bit for bit.
func TestGoldenBlockScaling(t *testing.T) {
	g, meta := openGolden(t)
	for _, c := range []struct{ name, input string }{{"block_act", "x"}, {"block_weight", "w"}} {
		t.Run(c.name, func(t *testing.T) {
			in, shape := g.RequireF32(t, c.name, c.input)
			require.Len(t, shape, 2)
			block := meta[c.name].Block
			require.Len(t, block, 2)
			codes, s, err := fp8.QuantizeBlocks(in, shape[0], shape[1], block[0], block[1])
			require.NoError(t, err)
			scales, _ := g.RequireF32(t, c.name, "scales")
			assert.Equal(t, scales, s)
			assert.Equal(t, g.RequireRaw(t, c.name, "codes", "U8").Data, codes)
		})
	}
	_, _, err := fp8.QuantizeBlocks(make([]float32, 100), 1, 100, 1, 128)
	require.ErrorIs(t, err, kernels.ErrShape)
}
