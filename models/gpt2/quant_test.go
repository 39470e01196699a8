package gpt2_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/gpt2"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/zbench"
)

// int8Tolerance bounds the int8 model's logits' relative error against the
// float32 model's and against the float64 reference.
const int8Tolerance = 5e-2

// TestQuantize quantizes every golden case's model to W8A8 int8 on every
// device with kernels.Quant and bounds its logits' error against the same
// model in float32 and against the reference; the report has one entry
// per linear layer of every block, each in about half float16's bytes.
func TestQuantize(t *testing.T) {
	devs, err := zbench.Devices()
	require.NoError(t, err)
	for _, dev := range devs {
		if _, err := kernels.Group[kernels.Quant](dev); err != nil {
			continue
		}
		for _, c := range loadCases(t) {
			if c.Name == "tiny_right" {
				continue // the checkpoint of tiny
			}
			t.Run(fmt.Sprintf("dev=%s/%s", dev.Name(), c.Name), func(t *testing.T) {
				cfg, src := c.source(t)
				m, err := gpt2.Load(dev, cfg, src, nn.F32)
				require.NoError(t, err)
				defer func() { require.NoError(t, m.Close()) }()
				float := run(t, m, c)
				rep, err := m.Quantize()
				require.NoError(t, err)
				require.True(t, m.Quantized())
				require.Len(t, rep, 4*cfg.NLayer)
				assert.Equal(t, "h.0.attn.c_attn", rep[0].Name)
				assert.Equal(t, fmt.Sprintf("h.%d.mlp.c_proj", cfg.NLayer-1), rep[len(rep)-1].Name)
				for _, r := range rep {
					assert.Greater(t, r.WeightSQNR, 30.0, "%s: weight SQNR", r.Name)
					assert.Less(t, float64(r.Bytes), 0.6*float64(r.F16Bytes), "%s: int8 bytes against float16's", r.Name)
				}
				got := run(t, m, c)
				vsFloat, _ := kernels.RelErr(widen(got), widen(float))
				vsRef, _ := c.relErr(got, cfg.VocabSize)
				t.Logf("int8 rel-err against float32 %.3g, against the reference %.3g", vsFloat, vsRef)
				assert.LessOrEqual(t, vsFloat, int8Tolerance)
				assert.LessOrEqual(t, vsRef, int8Tolerance)

				_, err = m.Quantize()
				assert.ErrorIs(t, err, gpt2.ErrInput, "quantized twice")
			})
		}
	}
}
