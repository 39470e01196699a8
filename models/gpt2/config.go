package gpt2

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

// ErrConfig marks a config.json that is malformed or asks for something
// this implementation does not do.
var ErrConfig = errors.New("bad GPT-2 config")

// Config holds the fields of a Hugging Face GPT2Config that change the
// computation. Fields missing from a config.json take Hugging Face's
// defaults, which are GPT-2 small's.
type Config struct {
	VocabSize  int `json:"vocab_size"`
	NPositions int `json:"n_positions"`
	NEmbd      int `json:"n_embd"`
	NLayer     int `json:"n_layer"`
	NHead      int `json:"n_head"`
	// NInner is the MLP's width; 0 (config.json's null) means 4·NEmbd.
	NInner             int     `json:"n_inner"`
	LayerNormEpsilon   float64 `json:"layer_norm_epsilon"`
	ActivationFunction string  `json:"activation_function"`
	// ScaleAttnWeights divides the attention scores by √head_dim.
	ScaleAttnWeights bool `json:"scale_attn_weights"`
}

// Small is GPT-2 small (openai-community/gpt2): 12 layers of width 768,
// 124M parameters.
func Small() Config {
	return Config{
		VocabSize: 50257, NPositions: 1024, NEmbd: 768, NLayer: 12, NHead: 12,
		LayerNormEpsilon: 1e-5, ActivationFunction: "gelu_new", ScaleAttnWeights: true,
	}
}

// Inner is the MLP's width: NInner, or 4·NEmbd when it is 0.
func (c Config) Inner() int {
	if c.NInner > 0 {
		return c.NInner
	}
	return 4 * c.NEmbd
}

// HeadDim is the width of one attention head.
func (c Config) HeadDim() int { return c.NEmbd / c.NHead }

// Act is the MLP's activation: gelu_new, the tanh approximation.
func (c Config) Act() kernels.Activation { return kernels.ActGELUTanh }

// Validate reports the first field that is out of range, naming it.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"n_positions", c.NPositions}, {"n_embd", c.NEmbd},
		{"n_layer", c.NLayer}, {"n_head", c.NHead},
	} {
		if f.v <= 0 {
			return fmt.Errorf("%s = %d, want > 0: %w", f.name, f.v, ErrConfig)
		}
	}
	if c.NInner < 0 {
		return fmt.Errorf("n_inner = %d, want > 0 or null: %w", c.NInner, ErrConfig)
	}
	if c.NEmbd%c.NHead != 0 {
		return fmt.Errorf("n_embd %d is not a multiple of n_head %d: %w", c.NEmbd, c.NHead, ErrConfig)
	}
	if c.ActivationFunction != "gelu_new" {
		return fmt.Errorf("activation_function %q is not supported (only \"gelu_new\"): %w", c.ActivationFunction, ErrConfig)
	}
	if !(c.LayerNormEpsilon > 0) || c.LayerNormEpsilon > 1 {
		return fmt.Errorf("layer_norm_epsilon = %g, want in (0, 1]: %w", c.LayerNormEpsilon, ErrConfig)
	}
	return nil
}

// unsupported lists config.json keys whose other values change the model
// into one this package does not implement, with the value that is
// accepted.
var unsupported = map[string]any{
	"model_type":                      "gpt2",
	"scale_attn_by_inverse_layer_idx": false,
	"reorder_and_upcast_attn":         false,
	"add_cross_attention":             false,
	"tie_word_embeddings":             true,
}

// ParseConfig parses a Hugging Face config.json; name (the file's path)
// appears in errors. Keys that do not change the computation (dropout,
// summary heads, token ids, architectures, ...) are ignored.
func ParseConfig(name string, data []byte) (Config, error) {
	c := Small()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("gpt2: %s: not a JSON object: %v: %w", name, err, ErrConfig)
	}
	keys := make([]string, 0, len(unsupported))
	for k := range unsupported {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		want := unsupported[key]
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			continue
		}
		var got any
		if err := json.Unmarshal(v, &got); err != nil || got != want {
			return Config{}, fmt.Errorf("gpt2: %s: %s = %s is not supported (only %v): %w", name, key, v, want, ErrConfig)
		}
	}
	// Decode field by field so that a wrong type names its key.
	fields := map[string]any{
		"vocab_size": &c.VocabSize, "n_positions": &c.NPositions, "n_embd": &c.NEmbd,
		"n_layer": &c.NLayer, "n_head": &c.NHead, "n_inner": &c.NInner,
		"layer_norm_epsilon": &c.LayerNormEpsilon, "activation_function": &c.ActivationFunction,
		"scale_attn_weights": &c.ScaleAttnWeights,
	}
	if err := nn.DecodeFields(raw, fields); err != nil {
		return Config{}, fmt.Errorf("gpt2: %s: %w: %w", name, err, ErrConfig)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("gpt2: %s: %w", name, err)
	}
	return c, nil
}

// LoadConfig reads and parses the config.json at path.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("gpt2: config: %w", err)
	}
	return ParseConfig(path, data)
}
