package llama

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/nn"
)

// fp8Tolerance bounds the relative error of the FP8 test model's logits
// against its float ones: E4M3's three mantissa bits cost about 2.3% per
// weight and per input (27 dB SQNR), which two layers keep within about
// 5%.
const fp8Tolerance = 8e-2

// TestQuantizeFP8 converts a float model's modules to FP8 and checks the
// report, the sizes, the logits against the float model's, that decode
// agrees with the full forward, and the refusals.
func TestQuantizeFP8(t *testing.T) {
	cfg := testConfig()
	for _, p := range []nn.Precision{nn.F32, nn.BF16} {
		t.Run(p.String(), func(t *testing.T) {
			m := loadTest(t, cfg, p)
			ids := randomIDs(7, 12, cfg.VocabSize)
			want, err := m.Forward(Inputs{IDs: toI32(ids)}, 1, len(ids))
			require.NoError(t, err)
			float := m.WeightBytes()
			rep, err := m.QuantizeFP8()
			require.NoError(t, err)
			require.True(t, m.Quantized())
			require.Len(t, rep, 7*cfg.NumHiddenLayers)
			for _, r := range rep {
				assert.Greater(t, r.WeightSQNR, 25.0, r.Name)
				assert.Less(t, r.WeightSQNR, 35.0, "%s: E4M3's, not int8's 48 dB", r.Name)
			}
			assert.Less(t, m.WeightBytes(), float, "E4M3 weights are smaller than %v", p)
			got, err := m.Forward(Inputs{IDs: toI32(ids)}, 1, len(ids))
			require.NoError(t, err)
			re := rel(t, got, want)
			t.Logf("%v: logits rel-err %.3g against the float model", p, re)
			assert.Less(t, re, fp8Tolerance)

			sess, err := m.NewSession(1, len(ids))
			require.NoError(t, err)
			defer func() { require.NoError(t, sess.Close()) }()
			require.NoError(t, sess.Prefill([][]int{ids[:5]}))
			V := cfg.VocabSize
			for n := 5; ; n++ {
				logits, err := sess.Logits()
				require.NoError(t, err)
				assert.Less(t, rel(t, logits, got[(n-1)*V:n*V]), 1e-2, "position %d: per-token scales make each token's product its own", n-1)
				if n == len(ids) {
					break
				}
				require.NoError(t, sess.Decode([]int{ids[n]}))
			}
			_, err = m.QuantizeFP8()
			require.ErrorIs(t, err, ErrInput, "quantized twice")
		})
	}
	m, err := Load(floatOnly{cpu.New(), cpu.New()}, cfg, Synthetic(5), nn.F32)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	_, err = m.QuantizeFP8()
	require.ErrorIs(t, err, kernels.ErrUnsupported)
}
