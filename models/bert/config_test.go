package bert_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/bert"
)

const (
	tinyDir    = "../../testdata/golden/bert-tiny"
	tinyConfig = tinyDir + "/config.json"
	tinyModel  = tinyDir + "/model.safetensors"
)

// tinyCfg is testdata/golden/bert-tiny/config.json's computation.
func tinyCfg() bert.Config {
	return bert.Config{
		VocabSize: 99, HiddenSize: 32, NumHiddenLayers: 2, NumAttentionHeads: 4,
		IntermediateSize: 37, HiddenAct: "gelu", MaxPositionEmbeddings: 64,
		TypeVocabSize: 2, LayerNormEps: 1e-12,
	}
}

func TestParseConfigValid(t *testing.T) {
	tiny, err := os.ReadFile(tinyConfig)
	require.NoError(t, err)
	withAct := func(act string) bert.Config { c := bert.Base(); c.HiddenAct = act; return c }
	tests := []struct {
		name string
		json string
		want bert.Config
	}{
		{"tiny", string(tiny), tinyCfg()},
		{"empty object is bert-base", `{}`, bert.Base()},
		{"nulls keep the defaults", `{"hidden_size": null, "model_type": null, "is_decoder": null}`, bert.Base()},
		{"gelu_new", `{"hidden_act": "gelu_new"}`, withAct("gelu_new")},
		{"gelu_pytorch_tanh", `{"hidden_act": "gelu_pytorch_tanh"}`, withAct("gelu_pytorch_tanh")},
		{"relu", `{"hidden_act": "relu"}`, withAct("relu")},
		{"supported values of the checked keys", `{"model_type": "bert", "position_embedding_type": "absolute",
			"is_decoder": false, "add_cross_attention": false}`, bert.Base()},
		{"irrelevant keys are ignored", `{"hidden_dropout_prob": 0.3, "id2label": {"0": "A"}, "architectures": ["X"],
			"torch_dtype": "float16", "transformers_version": "4.40.0", "use_cache": false}`, bert.Base()},
		{"bert-large sizes", `{"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
			"intermediate_size": 4096}`, func() bert.Config {
			c := bert.Base()
			c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 1024, 24, 16, 4096
			return c
		}()},
		{"layer_norm_eps 1", `{"layer_norm_eps": 1}`, func() bert.Config { c := bert.Base(); c.LayerNormEps = 1; return c }()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := bert.ParseConfig("config.json", []byte(tc.json))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.NoError(t, got.Validate())
		})
	}
}

func TestConfigActAndHeadDim(t *testing.T) {
	for _, tc := range []struct {
		act  string
		want kernels.Activation
	}{
		{"gelu", kernels.ActGELU}, {"gelu_new", kernels.ActGELUTanh},
		{"gelu_pytorch_tanh", kernels.ActGELUTanh}, {"relu", kernels.ActReLU},
	} {
		c, err := bert.ParseConfig("c.json", []byte(`{"hidden_act": "`+tc.act+`"}`))
		require.NoError(t, err)
		assert.Equal(t, tc.want, c.Act(), tc.act)
	}
	assert.Equal(t, 64, bert.Base().HeadDim())
	assert.Equal(t, 8, tinyCfg().HeadDim())
	assert.Equal(t, 6, bert.Train6().NumHiddenLayers)
}

func TestParseConfigInvalid(t *testing.T) {
	tests := []struct {
		name string
		json string
		key  string // a substring the message must contain
	}{
		{"not JSON", `{"hidden_size": 768,`, "not a JSON object"},
		{"empty input", ``, "not a JSON object"},
		{"JSON array", `[{"hidden_size": 768}]`, "not a JSON object"},
		{"JSON string", `"bert"`, "not a JSON object"},
		{"model_type roberta", `{"model_type": "roberta"}`, "model_type"},
		{"model_type number", `{"model_type": 1}`, "model_type"},
		{"relative_key", `{"position_embedding_type": "relative_key"}`, "position_embedding_type"},
		{"is_decoder", `{"is_decoder": true}`, "is_decoder"},
		{"is_decoder as string", `{"is_decoder": "false"}`, "is_decoder"},
		{"add_cross_attention", `{"add_cross_attention": true}`, "add_cross_attention"},
		{"swish", `{"hidden_act": "swish"}`, "hidden_act"},
		{"hidden_act empty", `{"hidden_act": ""}`, "hidden_act"},
		{"hidden_act not a string", `{"hidden_act": 3}`, "hidden_act"},
		{"hidden_size as string", `{"hidden_size": "768"}`, "hidden_size"},
		{"hidden_size float", `{"hidden_size": 768.5}`, "hidden_size"},
		{"hidden_size 0", `{"hidden_size": 0}`, "hidden_size"},
		{"vocab_size negative", `{"vocab_size": -1}`, "vocab_size"},
		{"num_hidden_layers 0", `{"num_hidden_layers": 0}`, "num_hidden_layers"},
		{"num_attention_heads 0", `{"num_attention_heads": 0}`, "num_attention_heads"},
		{"intermediate_size 0", `{"intermediate_size": 0}`, "intermediate_size"},
		{"max_position_embeddings 0", `{"max_position_embeddings": 0}`, "max_position_embeddings"},
		{"type_vocab_size 0", `{"type_vocab_size": 0}`, "type_vocab_size"},
		{"heads do not divide width", `{"hidden_size": 768, "num_attention_heads": 7}`, "num_attention_heads"},
		{"layer_norm_eps 0", `{"layer_norm_eps": 0}`, "layer_norm_eps"},
		{"layer_norm_eps negative", `{"layer_norm_eps": -1e-12}`, "layer_norm_eps"},
		{"layer_norm_eps too big", `{"layer_norm_eps": 2}`, "layer_norm_eps"},
		{"layer_norm_eps string", `{"layer_norm_eps": "1e-12"}`, "layer_norm_eps"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bert.ParseConfig("some/config.json", []byte(tc.json))
			require.Error(t, err)
			assert.ErrorIs(t, err, bert.ErrConfig)
			assert.Contains(t, err.Error(), tc.key)
			assert.Contains(t, err.Error(), "some/config.json", "the message names the file")
		})
	}
}

func TestValidate(t *testing.T) {
	assert.NoError(t, bert.Base().Validate())
	assert.NoError(t, bert.Train6().Validate())
	assert.NoError(t, tinyCfg().Validate())
	bad := tinyCfg()
	bad.LayerNormEps = 0
	assert.ErrorIs(t, bad.Validate(), bert.ErrConfig)
	assert.ErrorIs(t, bert.Config{}.Validate(), bert.ErrConfig)
}

func TestLoadConfig(t *testing.T) {
	c, err := bert.LoadConfig(tinyConfig)
	require.NoError(t, err)
	assert.Equal(t, tinyCfg(), c)

	missing := filepath.Join(t.TempDir(), "nope", "config.json")
	_, err = bert.LoadConfig(missing)
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), missing)

	bad := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"hidden_act": "swish"}`), 0o644))
	_, err = bert.LoadConfig(bad)
	assert.ErrorIs(t, err, bert.ErrConfig)
	assert.Contains(t, err.Error(), bad)
}

func FuzzParseConfig(f *testing.F) {
	tiny, err := os.ReadFile(tinyConfig)
	require.NoError(f, err)
	f.Add(tiny)
	for _, s := range []string{
		`{}`, `[]`, `null`, `{"hidden_size": 768,`, `{"model_type": "roberta"}`,
		`{"position_embedding_type": "relative_key"}`, `{"is_decoder": true}`, `{"hidden_act": "swish"}`,
		`{"hidden_size": "768"}`, `{"hidden_size": 0}`, `{"hidden_size": 768, "num_attention_heads": 7}`,
		`{"layer_norm_eps": 0}`, `{"hidden_size": 9223372036854775807, "num_attention_heads": 1}`,
		`{"num_attention_heads": -1, "hidden_size": -768}`, `{"layer_norm_eps": 1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := bert.ParseConfig("fuzz.json", data)
		if err != nil {
			if !errors.Is(err, bert.ErrConfig) {
				t.Fatalf("error does not wrap ErrConfig: %v", err)
			}
			if !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a config that Validate rejects: %v", err)
		}
		_ = c.Act()
		_ = c.HeadDim()
	})
}
