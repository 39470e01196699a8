package bert

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
)

// ErrConfig marks a config.json that is malformed or asks for something
// this implementation does not do.
var ErrConfig = errors.New("bad BERT config")

// Config holds the fields of a Hugging Face BertConfig that change the
// computation. Fields missing from a config.json take Hugging Face's
// defaults, which are BERT-base's.
type Config struct {
	VocabSize             int     `json:"vocab_size"`
	HiddenSize            int     `json:"hidden_size"`
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	IntermediateSize      int     `json:"intermediate_size"`
	HiddenAct             string  `json:"hidden_act"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	TypeVocabSize         int     `json:"type_vocab_size"`
	LayerNormEps          float64 `json:"layer_norm_eps"`
	// Quant is the scheme of a quantized checkpoint (config.json's
	// quantization_config, see Load), "" for a float one.
	Quant quant.Scheme `json:"-"`
}

// Base is bert-base-uncased: 12 layers of width 768, 110M parameters.
func Base() Config {
	return Config{
		VocabSize: 30522, HiddenSize: 768, NumHiddenLayers: 12, NumAttentionHeads: 12,
		IntermediateSize: 3072, HiddenAct: "gelu", MaxPositionEmbeddings: 512,
		TypeVocabSize: 2, LayerNormEps: 1e-12,
	}
}

// Train6 is the encoder of the training benchmark: BERT-base's width and
// vocabulary with 6 layers (DistilBERT's shape). With the masked-LM head
// it has 66,987,066 parameters: 43,546,170 besides the 23,440,896 of the
// token embedding table that the head's decoder shares.
func Train6() Config {
	c := Base()
	c.NumHiddenLayers = 6
	return c
}

// activations maps hidden_act values to kernel activations.
var activations = map[string]kernels.Activation{
	"gelu":              kernels.ActGELU,
	"gelu_new":          kernels.ActGELUTanh,
	"gelu_pytorch_tanh": kernels.ActGELUTanh,
	"relu":              kernels.ActReLU,
}

// Act returns the kernel activation of HiddenAct.
func (c Config) Act() kernels.Activation { return activations[c.HiddenAct] }

// HeadDim is the width of one attention head.
func (c Config) HeadDim() int { return c.HiddenSize / c.NumAttentionHeads }

// Validate reports the first field that is out of range, naming it.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"intermediate_size", c.IntermediateSize}, {"max_position_embeddings", c.MaxPositionEmbeddings},
		{"type_vocab_size", c.TypeVocabSize},
	} {
		if f.v <= 0 {
			return fmt.Errorf("%s = %d, want > 0: %w", f.name, f.v, ErrConfig)
		}
	}
	if c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("hidden_size %d is not a multiple of num_attention_heads %d: %w",
			c.HiddenSize, c.NumAttentionHeads, ErrConfig)
	}
	if _, ok := activations[c.HiddenAct]; !ok {
		names := make([]string, 0, len(activations))
		for k := range activations {
			names = append(names, k)
		}
		slices.Sort(names)
		return fmt.Errorf("hidden_act %q is not supported (want one of %q): %w", c.HiddenAct, names, ErrConfig)
	}
	if !(c.LayerNormEps > 0) || c.LayerNormEps > 1 {
		return fmt.Errorf("layer_norm_eps = %g, want in (0, 1]: %w", c.LayerNormEps, ErrConfig)
	}
	return nil
}

// unsupported lists config.json keys whose non-default values change the
// model into one this package does not implement, with the value that is
// accepted.
var unsupported = map[string]any{
	"model_type":              "bert",
	"position_embedding_type": "absolute",
	"is_decoder":              false,
	"add_cross_attention":     false,
}

// ParseConfig parses a Hugging Face config.json; name (the file's path)
// appears in errors. Keys that do not change the computation (dropout,
// labels, architectures, ...) are ignored.
func ParseConfig(name string, data []byte) (Config, error) {
	c := Base()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("bert: %s: not a JSON object: %v: %w", name, err, ErrConfig)
	}
	for key, want := range unsupported {
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			continue
		}
		var got any
		if err := json.Unmarshal(v, &got); err != nil || got != want {
			return Config{}, fmt.Errorf("bert: %s: %s = %s is not supported (only %v): %w", name, key, v, want, ErrConfig)
		}
	}
	// Decode field by field so that a wrong type names its key.
	fields := map[string]any{
		"vocab_size": &c.VocabSize, "hidden_size": &c.HiddenSize,
		"num_hidden_layers": &c.NumHiddenLayers, "num_attention_heads": &c.NumAttentionHeads,
		"intermediate_size": &c.IntermediateSize, "hidden_act": &c.HiddenAct,
		"max_position_embeddings": &c.MaxPositionEmbeddings, "type_vocab_size": &c.TypeVocabSize,
		"layer_norm_eps": &c.LayerNormEps,
	}
	if err := nn.DecodeFields(raw, fields); err != nil {
		return Config{}, fmt.Errorf("bert: %s: %w: %w", name, err, ErrConfig)
	}
	if v, ok := raw["quantization_config"]; ok && string(v) != "null" {
		if err := c.parseQuantization(name, v); err != nil {
			return Config{}, err
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("bert: %s: %w", name, err)
	}
	return c, nil
}

// LoadConfig reads and parses the config.json at path.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("bert: config: %w", err)
	}
	return ParseConfig(path, data)
}
