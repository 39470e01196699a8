package bert

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/fp8"
	"github.com/zbench/zbench/models/nn"
)

// amaxOf is the largest magnitude of x.
func amaxOf(t *testing.T, x *kernels.Tensor) float32 {
	t.Helper()
	v, err := kernels.ToFloat32(x)
	require.NoError(t, err)
	m := float32(0)
	for _, e := range v {
		m = max(m, float32(math.Abs(float64(e))))
	}
	return m
}

// TestFP8TrainerDelayedScaling checks the wiring of FP8 training: every
// linear of every layer casts its weight, its input (query, key and value
// sharing one) and its output gradient with a scale of its own, 1 at the
// first step and then fp8_max/amax of what the first step's casts saw.
func TestFP8TrainerDelayedScaling(t *testing.T) {
	cfg := smallConfig()
	batch := Batch{
		IDs:    []int32{7, 3, 9, 11, 40, 2, 8, 13, 21, 5, 6, 30},
		Labels: []int32{-100, 5, -100, -100, 6, -100, -100, -100, 12, -100, -100, 7},
	}
	o := TrainOptions{Batch: 2, Seq: 6, Opt: nn.AdamW{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, Precision: nn.BF16,
		FP8: &fp8.DelayedScaling{AmaxHistoryLen: 4}}
	tr, err := NewTrainer(cpu.New(), cfg, Synthetic(5), o)
	require.NoError(t, err)
	defer func() { require.NoError(t, tr.Close()) }()
	f := tr.fp8
	require.Len(t, f.lins, cfg.NumHiddenLayers)
	for _, row := range f.lins {
		for j, l := range row {
			for _, c := range []*scaledCast{l.x, l.w, l.dy} {
				assert.Equal(t, float32(1), c.meta.Scale(), "linear %d: scale 1 before the first step", j)
			}
		}
	}
	_, err = tr.Step(batch)
	require.NoError(t, err)
	seen := map[*scaledCast]bool{}
	for i, row := range f.lins {
		assert.Same(t, row[linQ].x, row[linK].x, "layer %d: query and key read one cast input", i)
		assert.Same(t, row[linQ].x, row[linV].x, "layer %d: query and value read one cast input", i)
		x := []*kernels.Tensor{tr.enc.layers[i].x, tr.enc.layers[i].x, tr.enc.layers[i].x,
			tr.enc.layers[i].a, tr.enc.layers[i].h1, tr.enc.layers[i].f}
		for j, l := range row {
			assert.Equal(t, []kernels.DType{kernels.E4M3, kernels.E4M3, kernels.E5M2}, []kernels.DType{l.x.meta.DType(), l.w.meta.DType(), l.dy.meta.DType()})
			assert.InDelta(t, 448/amaxOf(t, l.lin.W), l.w.meta.Scale(), 0, "layer %d linear %d: the weight's scale", i, j)
			assert.InDelta(t, 448/amaxOf(t, x[j]), l.x.meta.Scale(), 0, "layer %d linear %d: the input's scale", i, j)
			assert.Greater(t, l.dy.meta.Scale(), float32(57344), "layer %d linear %d: the gradient's scale (its amax below 1)", i, j)
			for _, c := range []*scaledCast{l.w, l.dy} {
				assert.False(t, seen[c], "layer %d linear %d: a cast of its own", i, j)
				seen[c] = true
			}
		}
	}
	// The next step casts with the updated scales: begin uploads them.
	require.NoError(t, f.begin())
	for _, c := range f.casts {
		for _, x := range []struct {
			t    *kernels.Tensor
			want float32
		}{{c.Scale, c.meta.Scale()}, {c.ScaleInv, c.meta.ScaleInv()}} {
			v, err := kernels.ToFloat32(x.t)
			require.NoError(t, err)
			assert.Equal(t, []float32{x.want}, v)
		}
	}
}
