package llama

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/quant"
)

// tinyLlamaJSON is TinyLlama-1.1B-Chat-v1.0's config.json as published.
const tinyLlamaJSON = `{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 5632,
  "max_position_embeddings": 2048,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 22,
  "num_key_value_heads": 4,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.35.0",
  "use_cache": true,
  "vocab_size": 32000
}`

func TestParseConfigTinyLlama(t *testing.T) {
	c, err := ParseConfig("config.json", []byte(tinyLlamaJSON))
	require.NoError(t, err)
	assert.Equal(t, TinyLlama(), c)
	assert.Equal(t, int64(1_100_048_384), c.CountParams())
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name  string
		json  string
		check func(t *testing.T, c Config)
		err   string // substring of the error; "" for none
	}{
		{name: "defaults and derived", json: `{"hidden_size": 64, "num_attention_heads": 4}`, check: func(t *testing.T, c Config) {
			assert.Equal(t, 16, c.HeadDim)
			assert.Equal(t, 4, c.NumKeyValueHeads)
			assert.Equal(t, []int{2}, c.EOSTokenIDs)
		}},
		{name: "explicit head_dim", json: `{"hidden_size": 64, "num_attention_heads": 4, "head_dim": 24}`, check: func(t *testing.T, c Config) {
			assert.Equal(t, 24, c.HeadDim)
			assert.Equal(t, 96, c.QDim())
		}},
		{name: "eos list", json: `{"eos_token_id": [128001, 128008, 128009], "vocab_size": 128256}`, check: func(t *testing.T, c Config) {
			assert.Equal(t, []int{128001, 128008, 128009}, c.EOSTokenIDs)
			assert.True(t, c.IsEOS(128009))
			assert.False(t, c.IsEOS(2))
		}},
		{name: "llama3 scaling", json: `{"vocab_size": 128256, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}}`,
			check: func(t *testing.T, c Config) {
				require.NotNil(t, c.RopeScaling)
				assert.Equal(t, "llama3", c.RopeScaling.Type)
			}},
		{name: "linear scaling, old key", json: `{"rope_scaling": {"type": "linear", "factor": 2.0}}`, check: func(t *testing.T, c Config) {
			assert.Equal(t, &RopeScaling{Type: "linear", Factor: 2}, c.RopeScaling)
		}},
		{name: "cosmetic keys ignored", json: `{"attention_dropout": 0.0, "use_cache": false, "pretraining_tp": 1, "sliding_window": null}`},
		{name: "not json", json: `{`, err: "not a JSON object"},
		{name: "dynamic scaling", json: `{"rope_scaling": {"type": "dynamic", "factor": 2.0}}`, err: `rope_scaling type "dynamic" is not supported`},
		{name: "yarn scaling", json: `{"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}`, err: `rope_scaling type "yarn"`},
		{name: "no factor", json: `{"rope_scaling": {"rope_type": "linear"}}`, err: "has no factor"},
		{name: "bias", json: `{"attention_bias": true}`, err: "attention_bias = true is not supported"},
		{name: "mlp bias", json: `{"mlp_bias": true}`, err: "mlp_bias = true"},
		{name: "gelu", json: `{"hidden_act": "gelu"}`, err: `hidden_act = "gelu" is not supported (only silu)`},
		{name: "mistral", json: `{"model_type": "mistral"}`, err: `model_type = "mistral"`},
		{name: "sliding window", json: `{"sliding_window": 4096}`, err: "sliding_window = 4096 is not supported (only null)"},
		{name: "quantized", json: `{"quantization_config": {"bits": 4}}`, err: "quantization_config: quant_method"},
		{name: "bad type", json: `{"hidden_size": "big"}`, err: `hidden_size = "big"`},
		{name: "gqa mismatch", json: `{"num_attention_heads": 32, "num_key_value_heads": 5}`, err: "not a multiple of num_key_value_heads 5"},
		{name: "odd head dim", json: `{"hidden_size": 60, "num_attention_heads": 4}`, err: "head_dim = 15, want even"},
		{name: "heads do not divide", json: `{"hidden_size": 66, "num_attention_heads": 4}`, err: "not a multiple of num_attention_heads"},
		{name: "zero layers", json: `{"num_hidden_layers": 0}`, err: "num_hidden_layers = 0, want in [1, "},
		{name: "eps", json: `{"rms_norm_eps": 0}`, err: "rms_norm_eps = 0"},
		{name: "eos outside vocab", json: `{"eos_token_id": 40000}`, err: "special token id 40000"},
		{name: "empty eos list", json: `{"eos_token_id": []}`, err: "eos_token_id = []"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig("dir/config.json", []byte(tc.json))
			if tc.err != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrConfig)
				assert.Contains(t, err.Error(), tc.err)
				assert.True(t, strings.HasPrefix(err.Error(), "llama: dir/config.json: "), err.Error())
				return
			}
			require.NoError(t, err)
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestInvFreq(t *testing.T) {
	c := TinyLlama()
	f := c.InvFreq()
	require.Len(t, f, 32)
	assert.Equal(t, float32(1), f[0])
	assert.InEpsilon(t, math.Pow(10000, -62.0/64), float64(f[31]), 1e-6)

	lin := c
	lin.RopeScaling = &RopeScaling{Type: "linear", Factor: 4}
	for i, v := range lin.InvFreq() {
		assert.InEpsilon(t, float64(f[i])/4, float64(v), 1e-6)
	}

	// llama3: wavelengths shorter than original/high_freq_factor are
	// kept, longer than original/low_freq_factor divided by the factor.
	l3 := c
	l3.RopeScaling = &RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 64}
	for i, v := range l3.InvFreq() {
		wave := 2 * math.Pi / float64(f[i])
		switch {
		case wave < 16:
			assert.Equal(t, f[i], v, "pair %d kept", i)
		case wave > 64:
			assert.InEpsilon(t, float64(f[i])/8, float64(v), 1e-6, "pair %d scaled", i)
		default:
			assert.Less(t, v, f[i])
			assert.Greater(t, v, f[i]/8)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(tinyLlamaJSON))
	f.Add([]byte(`{"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192}}`))
	f.Add([]byte(`{"eos_token_id": [1, 2], "head_dim": 8}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("fuzz.json", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "llama: fuzz.json: ") {
				t.Fatalf("error without the file name: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
		if n := c.HeadDim / 2; len(c.InvFreq()) != n {
			t.Fatalf("InvFreq has %d values, want %d", len(c.InvFreq()), n)
		}
	})
}

// TestConfigJSON checks that JSON writes a config.json ParseConfig reads
// back unchanged.
func TestConfigJSON(t *testing.T) {
	q := TinyLlama()
	q.Quant = &quant.Spec{Scheme: quant.W4A16, Group: 128, Ignore: []string{"lm_head"}}
	lin := testConfig()
	lin.RopeScaling = &RopeScaling{Type: "linear", Factor: 2}
	lin.EOSTokenIDs = []int{2, 7}
	for _, c := range []Config{TinyLlama(), testConfig(), q, lin} {
		data, err := c.JSON()
		require.NoError(t, err)
		back, err := ParseConfig("config.json", data)
		require.NoError(t, err)
		require.Equal(t, c, back)
	}
}
