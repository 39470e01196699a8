package fp8_test

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/fp8"
	"github.com/zbench/zbench/models/safetensors"
)

// goldenFile is written by testdata/reference/fp8.py.
const goldenFile = "../../testdata/golden/fp8.safetensors"

// goldenMeta is a case's metadata.
type goldenMeta struct {
	Op         string `json:"op"`
	Format     string `json:"format"`
	HistoryLen int    `json:"amax_history_len"`
	Algo       string `json:"amax_compute_algo"`
	Margin     int    `json:"margin"`
	Fused      bool   `json:"fused"`
	Block      []int  `json:"block"`
}

// golden opens the golden file: its tensors by name, and the cases'
// metadata and names by op.
func golden(t *testing.T) (tensor func(string) safetensors.Tensor, cases map[string][]string, meta map[string]goldenMeta) {
	t.Helper()
	f, err := safetensors.Open(goldenFile)
	require.NoError(t, err)
	cases, meta = map[string][]string{}, map[string]goldenMeta{}
	for name, v := range f.Metadata() {
		var m goldenMeta
		if json.Unmarshal([]byte(v), &m) == nil && m.Op != "" {
			cases[m.Op] = append(cases[m.Op], name)
			meta[name] = m
		}
	}
	for _, names := range cases {
		slices.Sort(names)
	}
	return func(name string) safetensors.Tensor {
		ten, err := f.Tensor(name)
		require.NoError(t, err)
		return ten
	}, cases, meta
}

// values widens a golden tensor to float32.
func values(t *testing.T, ten safetensors.Tensor) []float32 {
	t.Helper()
	v, err := ten.Float32()
	require.NoError(t, err)
	return v
}

// formats are the golden's names of the FP8 dtypes.
var formats = map[string]kernels.DType{"e4m3": kernels.E4M3, "e5m2": kernels.E5M2}

// TestGoldenDelayedScaling replays each golden amax sequence through Meta
// and requires, bit for bit, the scale each step casts with and the scale
// after its update: Transformer Engine's fused update, and its Python one.
func TestGoldenDelayedScaling(t *testing.T) {
	tensor, cases, meta := golden(t)
	f32 := func(name string) []float32 { return values(t, tensor(name)) }
	require.Len(t, cases["delayed_scaling"], 5)
	for _, name := range cases["delayed_scaling"] {
		t.Run(name, func(t *testing.T) {
			c := meta[name]
			m, err := fp8.DelayedScaling{Margin: c.Margin, AmaxHistoryLen: c.HistoryLen, AmaxComputeAlgo: c.Algo, Unfused: !c.Fused}.NewMeta(formats[c.Format])
			require.NoError(t, err)
			amax, scale, next := f32(name+"/amax"), f32(name+"/scale"), f32(name+"/scale_next")
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
	tensor, cases, meta := golden(t)
	f32 := func(name string) []float32 { return values(t, tensor(name)) }
	require.NotEmpty(t, cases["current_scaling"])
	be := cpu.New()
	for _, name := range cases["current_scaling"] {
		t.Run(name, func(t *testing.T) {
			dt := formats[meta[name].Format]
			x := f32(name + "/x")
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
			assert.Equal(t, f32(name+"/amax"), []float32{a})
			assert.Equal(t, f32(name+"/scale"), []float32{s})
			assert.Equal(t, f32(name+"/scale_inv"), []float32{1 / s})
			st, err := kernels.FromFloat32(be, kernels.F32, []float32{s}, 1)
			require.NoError(t, err)
			require.NoError(t, be.CastFP8(q, amax, xt, st))
			got := make([]byte, len(x))
			require.NoError(t, be.Download(got, q))
			assert.Equal(t, tensor(name+"/codes").Data, got)
			av, err := kernels.ToFloat32(amax)
			require.NoError(t, err)
			assert.Equal(t, a, av[0], "the cast's fused amax")
		})
	}
}

// TestGoldenBlockScaling checks QuantizeBlocks on DeepSeek-V3's 1×128
// activation and 128×128 weight blocks against the golden, bit for bit.
func TestGoldenBlockScaling(t *testing.T) {
	tensor, _, meta := golden(t)
	for _, c := range []struct{ name, input string }{{"block_act", "x"}, {"block_weight", "w"}} {
		t.Run(c.name, func(t *testing.T) {
			in := tensor(c.name + "/" + c.input)
			require.Len(t, in.Shape, 2)
			block := meta[c.name].Block
			require.Len(t, block, 2)
			codes, s, err := fp8.QuantizeBlocks(values(t, in), in.Shape[0], in.Shape[1], block[0], block[1])
			require.NoError(t, err)
			assert.Equal(t, values(t, tensor(c.name+"/scales")), s)
			assert.Equal(t, tensor(c.name+"/codes").Data, codes)
		})
	}
	_, _, err := fp8.QuantizeBlocks(make([]float32, 100), 1, 100, 1, 128)
	require.ErrorIs(t, err, kernels.ErrShape)
}
