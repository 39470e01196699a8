package lora_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/lora"
)

// peftConfig is adapter_config.json as PEFT 0.15 writes it for a LoRA of
// TinyLlama (get_peft_model with r=8, lora_alpha=16, lora_dropout=0.05,
// target_modules=["q_proj", "v_proj"], then save_pretrained): target
// modules in set order, and fields this package ignores.
const peftConfig = `{
  "alpha_pattern": {},
  "auto_mapping": null,
  "base_model_name_or_path": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
  "bias": "none",
  "corda_config": null,
  "eva_config": null,
  "exclude_modules": null,
  "fan_in_fan_out": false,
  "inference_mode": true,
  "init_lora_weights": true,
  "layer_replication": null,
  "layers_pattern": null,
  "layers_to_transform": null,
  "loftq_config": {},
  "lora_alpha": 16,
  "lora_bias": false,
  "lora_dropout": 0.05,
  "megatron_config": null,
  "megatron_core": "megatron.core",
  "modules_to_save": null,
  "peft_type": "LORA",
  "r": 8,
  "rank_pattern": {},
  "revision": null,
  "target_modules": [
    "v_proj",
    "q_proj"
  ],
  "task_type": "CAUSAL_LM",
  "trainable_token_indices": null,
  "use_dora": false,
  "use_rslora": false
}`

// defaultJSON is Python's json.dumps(indent=2, sort_keys=True) of the
// fields PEFT writes, for Default() of TinyLlama.
const defaultJSON = `{
  "alpha_pattern": {},
  "base_model_name_or_path": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
  "bias": "none",
  "fan_in_fan_out": false,
  "inference_mode": true,
  "init_lora_weights": true,
  "layers_pattern": null,
  "layers_to_transform": null,
  "lora_alpha": 32,
  "lora_dropout": 0.1,
  "modules_to_save": null,
  "peft_type": "LORA",
  "r": 8,
  "rank_pattern": {},
  "revision": null,
  "target_modules": [
    "q_proj",
    "v_proj"
  ],
  "task_type": "CAUSAL_LM",
  "use_dora": false,
  "use_rslora": false
}`

// withField returns peftConfig with field set to the JSON value val, or
// removed when val is "".
func withField(t testing.TB, field, val string) []byte {
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(peftConfig), &m))
	if val == "" {
		delete(m, field)
	} else {
		m[field] = json.RawMessage(val)
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

func TestParsePEFTConfig(t *testing.T) {
	c, err := lora.ParseConfig("adapter_config.json", []byte(peftConfig))
	require.NoError(t, err)
	assert.Equal(t, lora.Config{R: 8, Alpha: 16, Dropout: 0.05, Targets: []string{"q_proj", "v_proj"},
		BaseModel: "TinyLlama/TinyLlama-1.1B-Chat-v1.0"}, c)
}

func TestParseConfigFields(t *testing.T) {
	base := lora.Config{R: 8, Alpha: 16, Dropout: 0.05, Targets: []string{"q_proj", "v_proj"},
		BaseModel: "TinyLlama/TinyLlama-1.1B-Chat-v1.0"}
	for _, tc := range []struct {
		field, val string
		edit       func(c *lora.Config)
	}{
		{"target_modules", `"all-linear"`, func(c *lora.Config) { c.Targets = lora.Modules }},
		{"target_modules", `"k_proj"`, func(c *lora.Config) { c.Targets = []string{"k_proj"} }},
		{"target_modules", `["down_proj","self_attn.q_proj","q_proj","mlp.up_proj"]`,
			func(c *lora.Config) { c.Targets = []string{"q_proj", "up_proj", "down_proj"} }},
		{"target_modules", `null`, func(c *lora.Config) { c.Targets = lora.DefaultTargets }},
		{"target_modules", ``, func(c *lora.Config) { c.Targets = lora.DefaultTargets }},
		{"task_type", ``, func(c *lora.Config) {}},
		{"task_type", `null`, func(c *lora.Config) {}},
		{"bias", ``, func(c *lora.Config) {}},
		{"use_rslora", `true`, func(c *lora.Config) { c.RSLoRA = true }},
		{"lora_alpha", `32.5`, func(c *lora.Config) { c.Alpha = 32.5 }},
		{"lora_alpha", `16.0`, func(c *lora.Config) {}},
		{"lora_dropout", `0`, func(c *lora.Config) { c.Dropout = 0 }},
		{"lora_dropout", ``, func(c *lora.Config) { c.Dropout = 0 }},
		{"base_model_name_or_path", `null`, func(c *lora.Config) { c.BaseModel = "" }},
		{"modules_to_save", `[]`, func(c *lora.Config) {}},
		{"rank_pattern", `null`, func(c *lora.Config) {}},
		{"layers_to_transform", `[]`, func(c *lora.Config) {}},
		{"use_dora", `null`, func(c *lora.Config) {}},
		{"some_future_field", `{"x": [1, 2]}`, func(c *lora.Config) {}},
	} {
		t.Run(tc.field+"="+tc.val, func(t *testing.T) {
			c, err := lora.ParseConfig("adapter_config.json", withField(t, tc.field, tc.val))
			require.NoError(t, err)
			want := base
			tc.edit(&want)
			assert.Equal(t, want, c)
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	const file = "dir/adapter_config.json"
	for _, tc := range []struct {
		field, val string
		want       string // in the message besides the file's name
	}{
		// Features beyond plain LoRA.
		{"use_dora", `true`, "use_dora = true: not supported"},
		{"bias", `"all"`, `bias = "all": not supported`},
		{"bias", `"lora_only"`, `bias = "lora_only": not supported`},
		{"fan_in_fan_out", `true`, "fan_in_fan_out = true: not supported"},
		{"modules_to_save", `["lm_head"]`, `modules_to_save = ["lm_head"]: not supported`},
		{"layers_to_transform", `[0, 1]`, "layers_to_transform = [0,1]: not supported"},
		{"layers_to_transform", `3`, "layers_to_transform = 3: not supported"},
		{"rank_pattern", `{"q_proj": 16}`, `rank_pattern = {"q_proj":16}: not supported`},
		{"alpha_pattern", `{"q_proj": 16}`, `alpha_pattern = {"q_proj":16}: not supported`},
		{"lora_bias", `true`, "lora_bias = true: not supported"},
		{"exclude_modules", `["q_proj"]`, "exclude_modules"},
		{"target_modules", `".*\\.(q|v)_proj"`, "regular expression: not supported"},
		{"target_modules", `"model.layers.0.self_attn.q_proj"`, "regular expression: not supported"},
		{"target_modules", `"lm_head"`, `target_modules = "lm_head": not supported`},
		{"target_modules", `["q_proj", "lm_head"]`, `"lm_head": not supported`},
		{"target_modules", `["q_proj", "layers.0.self_attn.v_proj"]`, "not supported"},
		{"target_modules", `[]`, "target_modules is empty"},
		{"target_modules", `[1]`, "target_modules = [1]"},
		{"target_modules", `{}`, "target_modules = {}"},
		{"peft_type", `"IA3"`, `peft_type "IA3": not supported`},
		{"peft_type", ``, "peft_type is missing"},
		{"peft_type", `7`, "peft_type = 7: want a string"},
		{"task_type", `"SEQ_CLS"`, `task_type "SEQ_CLS": not supported`},
		// Numbers.
		{"r", ``, "r is missing"},
		{"r", `"8"`, `r = "8": want an integer`},
		{"r", `8.5`, "r = 8.5: want an integer"},
		{"r", `8.0`, "r = 8.0: want an integer"},
		{"r", `0`, "r = 0: the rank must be > 0"},
		{"r", `-8`, "r = -8"},
		{"r", `1e100`, "r = 1e100: want an integer"},
		{"lora_alpha", ``, "lora_alpha is missing"},
		{"lora_alpha", `"16"`, "lora_alpha"},
		{"lora_alpha", `1e400`, "lora_alpha = 1e400"},
		{"lora_dropout", `1`, "lora_dropout = 1: must be in [0, 1)"},
		{"lora_dropout", `-0.5`, "lora_dropout = -0.5"},
		{"lora_dropout", `"0.1"`, "lora_dropout"},
		{"use_rslora", `"yes"`, "use_rslora"},
		{"base_model_name_or_path", `5`, "base_model_name_or_path"},
	} {
		t.Run(tc.field+"="+tc.val, func(t *testing.T) {
			_, err := lora.ParseConfig(file, withField(t, tc.field, tc.val))
			require.ErrorIs(t, err, lora.ErrConfig)
			assert.Contains(t, err.Error(), file)
			assert.Contains(t, err.Error(), tc.field)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	for _, data := range []string{``, `null`, `[]`, `"LORA"`, `{"r": 8,}`, `{`} {
		_, err := lora.ParseConfig(file, []byte(data))
		require.ErrorIs(t, err, lora.ErrConfig, "%q", data)
		assert.Contains(t, err.Error(), file+": not a JSON object")
	}
}

func TestMarshal(t *testing.T) {
	c := lora.Default()
	c.BaseModel = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
	b, err := c.Marshal()
	require.NoError(t, err)
	assert.Equal(t, defaultJSON, string(b), "as PEFT writes it")

	// Every field PEFT writes, sorted.
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for k, v := range map[string]any{
		"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 8.0, "lora_alpha": 32.0, "lora_dropout": 0.1,
		"target_modules": []any{"q_proj", "v_proj"}, "bias": "none", "fan_in_fan_out": false,
		"use_rslora": false, "use_dora": false, "init_lora_weights": true, "inference_mode": true,
		"modules_to_save": nil, "layers_to_transform": nil, "layers_pattern": nil,
		"rank_pattern": map[string]any{}, "alpha_pattern": map[string]any{},
		"base_model_name_or_path": "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "revision": nil,
	} {
		require.Contains(t, m, k)
		assert.Equal(t, v, m[k], k)
	}
	assert.Len(t, m, 19)
	var keys []string
	for _, line := range strings.Split(string(b), "\n") {
		if k, _, ok := strings.Cut(strings.TrimSpace(line), `": `); ok && strings.HasPrefix(line, `  "`) {
			keys = append(keys, k)
		}
	}
	assert.True(t, slices.IsSorted(keys), "%v", keys)

	c.Targets = nil
	_, err = c.Marshal()
	require.ErrorIs(t, err, lora.ErrConfig)
}

func TestConfigRoundTrip(t *testing.T) {
	for _, c := range []lora.Config{
		lora.Default(),
		{R: 16, Alpha: 32, Dropout: 0, Targets: lora.Modules, RSLoRA: true, BaseModel: "meta-llama/Llama-2-7b-hf"},
		{R: 1, Alpha: 0.5, Dropout: 1e-05, Targets: []string{"o_proj"}},
		{R: 64, Alpha: 1234567.25, Dropout: 0.999, Targets: []string{"gate_proj", "down_proj"}},
		{R: 4, Alpha: 3e20, Dropout: 0.05, Targets: []string{"k_proj"}, BaseModel: "/models/ünïcode \"quoted\"\n\x7f 🦙 <&>"},
		{R: 4, Alpha: -1e-7, Dropout: 0.3333333333333333, Targets: []string{"up_proj"}},
	} {
		b, err := c.Marshal()
		require.NoError(t, err)
		got, err := lora.ParseConfig("x.json", b)
		require.NoError(t, err, "%s", b)
		assert.Equal(t, c, got, "%s", b)
		// Python's ensure_ascii: the file is plain ASCII.
		for _, r := range string(b) {
			require.Less(t, r, rune(0x7f), "%s", b)
		}
	}
}

func TestReadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "adapter_config.json")
	require.NoError(t, os.WriteFile(path, []byte(peftConfig), 0o644))
	c, err := lora.ReadConfig(path)
	require.NoError(t, err)
	assert.Equal(t, 8, c.R)

	require.NoError(t, os.WriteFile(path, withField(t, "use_dora", "true"), 0o644))
	_, err = lora.ReadConfig(path)
	require.ErrorIs(t, err, lora.ErrConfig)
	assert.Contains(t, err.Error(), path+": use_dora = true: not supported")

	_, err = lora.ReadConfig(filepath.Join(dir, "missing.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "missing.json")
}
