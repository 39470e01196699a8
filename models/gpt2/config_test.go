package gpt2_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/gpt2"
)

func TestParseConfig(t *testing.T) {
	cfg, err := gpt2.LoadConfig(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err)
	want := gpt2.Config{VocabSize: 256, NPositions: 64, NEmbd: 64, NLayer: 2, NHead: 4,
		LayerNormEpsilon: 1e-5, ActivationFunction: "gelu_new", ScaleAttnWeights: true}
	assert.Equal(t, want, cfg)
	assert.Equal(t, 256, cfg.Inner(), "n_inner null is 4·n_embd")
	assert.Equal(t, 16, cfg.HeadDim())

	def, err := gpt2.ParseConfig("config.json", []byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, gpt2.Small(), def, "missing keys take GPT-2 small's values")
	assert.Equal(t, int64(124439808), def.CountParams(), "GPT-2 small's parameters")

	inner, err := gpt2.ParseConfig("config.json", []byte(`{"n_inner": 100, "scale_attn_weights": false}`))
	require.NoError(t, err)
	assert.Equal(t, 100, inner.Inner())
	assert.False(t, inner.ScaleAttnWeights)
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, json, want string }{
		{"not json", `[1]`, "not a JSON object"},
		{"model type", `{"model_type": "gpt_neo"}`, `model_type = "gpt_neo" is not supported (only gpt2)`},
		{"inverse layer scaling", `{"scale_attn_by_inverse_layer_idx": true}`, "scale_attn_by_inverse_layer_idx = true is not supported"},
		{"upcast", `{"reorder_and_upcast_attn": true}`, "reorder_and_upcast_attn = true is not supported"},
		{"cross attention", `{"add_cross_attention": true}`, "add_cross_attention = true is not supported"},
		{"untied head", `{"tie_word_embeddings": false}`, "tie_word_embeddings = false is not supported"},
		{"activation", `{"activation_function": "relu"}`, `activation_function "relu" is not supported`},
		{"wrong type", `{"n_embd": "768"}`, `n_embd = "768"`},
		{"heads", `{"n_embd": 100, "n_head": 12}`, "n_embd 100 is not a multiple of n_head 12"},
		{"zero layers", `{"n_layer": 0}`, "n_layer = 0, want > 0"},
		{"epsilon", `{"layer_norm_epsilon": 0}`, "layer_norm_epsilon = 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gpt2.ParseConfig("my/config.json", []byte(tc.json))
			require.ErrorIs(t, err, gpt2.ErrConfig)
			assert.ErrorContains(t, err, "my/config.json")
			assert.ErrorContains(t, err, tc.want)
		})
	}
	_, err := gpt2.LoadConfig(filepath.Join(t.TempDir(), "none.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestSyntheticRange(t *testing.T) {
	for name, want := range map[string][2]float64{
		"h.0.ln_1.weight": {1, 0.1}, "ln_f.weight": {1, 0.1}, "h.11.ln_2.bias": {0, 0.02},
		"h.3.attn.c_attn.bias": {0, 0.02}, "h.3.mlp.c_fc.weight": {0, 0.05}, "wte.weight": {0, 0.05},
	} {
		c, h := gpt2.SyntheticRange(name)
		assert.Equal(t, want, [2]float64{c, h}, name)
	}
}
