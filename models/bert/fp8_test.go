package bert_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/nn"
)

// TestQuantizeFP8 converts the tiny checkpoint's encoder linears to FP8
// and checks the report and last_hidden_state against the float model:
// E4M3's three mantissa bits (about 30 dB per weight and per input) keep
// two layers within a few percent.
func TestQuantizeFP8(t *testing.T) {
	ck, err := bert.OpenCheckpoint(tinyModel)
	require.NoError(t, err)
	m := loadTiny(t, ck, nn.F32)
	in, batch, seq := tinyInputs(t)
	want, _ := run(t, m, in, batch, seq)
	rep, err := m.QuantizeFP8()
	require.NoError(t, err)
	require.True(t, m.Quantized())
	require.True(t, m.FP8())
	require.Len(t, rep, 6*m.Config.NumHiddenLayers)
	for _, r := range rep {
		assert.Greater(t, r.WeightSQNR, 25.0, r.Name)
		assert.Less(t, r.Bytes*3, r.F32Bytes, "%s: a byte per weight with the scales", r.Name)
	}
	got, _ := run(t, m, in, batch, seq)
	rel := relErr(got, want)
	t.Logf("last_hidden_state rel-err %.3g against the float model", rel)
	assert.Less(t, rel, 1e-2, "measured 1.6e-3")

	_, err = m.QuantizeFP8()
	require.ErrorIs(t, err, bert.ErrInput, "quantized twice")
	_, err = m.QuantizedTensors()
	require.ErrorIs(t, err, kernels.ErrUnsupported)
}
