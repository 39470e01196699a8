package bert

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/nn"
)

// smallConfig is a 3-layer encoder small enough for these tests.
func smallConfig() Config {
	return Config{
		VocabSize: 50, HiddenSize: 16, NumHiddenLayers: 3, NumAttentionHeads: 2,
		IntermediateSize: 24, HiddenAct: "gelu", MaxPositionEmbeddings: 16,
		TypeVocabSize: 2, LayerNormEps: 1e-12,
	}
}

// TestInferenceKeepsNothing checks the buffers inference gives the shared
// layer forward: one set for every layer, in place, without the
// pre-activation or the layer norms' statistics, the stacked projection
// and no heads split, with float16 copies for the attention core in Mixed
// precision only.
func TestInferenceKeepsNothing(t *testing.T) {
	for _, prec := range []nn.Precision{nn.F32, nn.BF16, nn.Mixed} {
		t.Run(prec.String(), func(t *testing.T) {
			m, err := Load(cpu.New(), smallConfig(), Synthetic(1), prec)
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close()) }()
			f, err := m.NewForward(2, 5)
			require.NoError(t, err)
			defer func() { require.NoError(t, f.Close()) }()
			require.Len(t, f.enc.layers, 3)
			assert.Nil(t, f.enc.mean)
			assert.Nil(t, f.enc.rstd)
			for i, l := range f.enc.layers {
				assert.Equal(t, f.enc.layers[0], l, "layer %d shares the buffers", i)
				assert.Same(t, l.x, l.out, "in place")
				assert.Same(t, l.x, l.r1, "residual sum in place")
				assert.Same(t, l.h1, l.r2, "residual sum in place")
				for _, x := range []*kernels.Tensor{l.u, l.mean1, l.rstd1, l.mean2, l.rstd2, l.q, l.k, l.v, l.qh, l.kh, l.vh, l.ah} {
					assert.Nil(t, x)
				}
				assert.Equal(t, []int{10, 3 * smallConfig().HiddenSize}, []int(l.qkv.Shape()), "the stacked projection")
				for _, x := range []*kernels.Tensor{l.qkvc, l.a4c} {
					assert.Equal(t, prec == nn.Mixed, x != nil, "float16 copies")
					if x != nil {
						assert.Equal(t, prec.AttnDType(), x.DType())
					}
				}
			}
		})
	}
}

// TestTrainingAndInferenceForwardAgree runs the shared forward with the
// training buffers and with the inference ones on the same weights and
// tokens: the encoder outputs agree (to the rounding of the fused and
// unfused residual sums and activation), and training kept each layer's
// input and output apart.
func TestTrainingAndInferenceForwardAgree(t *testing.T) {
	cfg := smallConfig()
	be := cpu.New()
	const B, S = 2, 6
	batch := Batch{
		IDs:     []int32{4, 9, 3, 17, 42, 8, 1, 33, 7, 7, 20, 49},
		TypeIDs: []int32{0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1},
		Labels:  []int32{-100, 5, -100, -100, 6, -100, -100, -100, 12, -100, -100, -100},
	}
	tr, err := NewTrainer(be, cfg, Synthetic(3), TrainOptions{Batch: B, Seq: S, Opt: DefaultAdamW()})
	require.NoError(t, err)
	defer func() { require.NoError(t, tr.Close()) }()
	rows, targets, err := tr.setBatch(batch)
	require.NoError(t, err)
	require.NoError(t, tr.sizeHead(rows, targets))
	require.NoError(t, tr.forward())
	trained, err := kernels.ToFloat32(tr.enc.hidden())
	require.NoError(t, err)
	for i, l := range tr.enc.layers {
		assert.NotSame(t, l.x, l.out, "layer %d", i)
		if i > 0 {
			assert.Same(t, tr.enc.layers[i-1].out, l.x, "layer %d reads the previous output", i)
		}
	}

	m, err := Load(be, cfg, Synthetic(3), nn.F32)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	f, err := m.NewForward(B, S)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	require.NoError(t, f.SetInputs(Inputs{IDs: batch.IDs, TypeIDs: batch.TypeIDs}))
	require.NoError(t, f.Run())
	inferred, err := f.LastHidden()
	require.NoError(t, err)
	require.Len(t, trained, len(inferred))
	for i := range inferred {
		require.InDelta(t, inferred[i], trained[i], 1e-5, "element %d", i)
	}
}
