package llama

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/zbench/zbench/models/quant"
)

// ErrConfig marks a config.json that is malformed or asks for something
// this implementation does not do.
var ErrConfig = errors.New("bad Llama config")

// RopeScaling is config.json's rope_scaling: how the rotary frequencies
// are stretched for contexts longer than the model was trained on.
type RopeScaling struct {
	// Type is "linear" (positions divided by Factor) or "llama3" (low
	// frequencies divided by Factor, high ones kept, a smooth blend between
	// LowFreqFactor and HighFreqFactor wavelengths).
	Type                          string
	Factor                        float64
	LowFreqFactor, HighFreqFactor float64
	OriginalMaxPositionEmbeddings int
}

// Config holds the fields of a Hugging Face LlamaConfig that change the
// computation. Fields missing from a config.json take Hugging Face's
// defaults.
type Config struct {
	VocabSize             int
	HiddenSize            int
	IntermediateSize      int
	NumHiddenLayers       int
	NumAttentionHeads     int
	NumKeyValueHeads      int // grouped KV heads; equal to NumAttentionHeads without GQA
	HeadDim               int // hidden_size / num_attention_heads unless config.json says
	RMSNormEps            float64
	RopeTheta             float64
	RopeScaling           *RopeScaling // nil: none
	MaxPositionEmbeddings int
	TieWordEmbeddings     bool
	BOSTokenID            int
	EOSTokenIDs           []int // eos_token_id, an int or a list in config.json
	TorchDType            string
	// Quant is the quantization_config of a quantized checkpoint (see
	// quantized.go), nil for a float one.
	Quant *quant.Spec `json:"-"`
}

// TinyLlama is TinyLlama-1.1B (TinyLlama/TinyLlama-1.1B-Chat-v1.0):
// 22 layers of width 2048, 32 query heads sharing 4 KV heads, the Llama 2
// vocabulary; 1,100,048,384 parameters.
func TinyLlama() Config {
	return Config{
		VocabSize: 32000, HiddenSize: 2048, IntermediateSize: 5632, NumHiddenLayers: 22,
		NumAttentionHeads: 32, NumKeyValueHeads: 4, HeadDim: 64, RMSNormEps: 1e-5,
		RopeTheta: 10000, MaxPositionEmbeddings: 2048, BOSTokenID: 1, EOSTokenIDs: []int{2},
		TorchDType: "bfloat16",
	}
}

// defaults are LlamaConfig's defaults (Llama 2 7B's sizes); HeadDim and
// NumKeyValueHeads are derived after parsing when absent.
func defaults() Config {
	return Config{
		VocabSize: 32000, HiddenSize: 4096, IntermediateSize: 11008, NumHiddenLayers: 32,
		NumAttentionHeads: 32, RMSNormEps: 1e-6, RopeTheta: 10000, MaxPositionEmbeddings: 2048,
		BOSTokenID: 1, EOSTokenIDs: []int{2},
	}
}

// KVDim is the width of the keys (and values) of one token: KV heads ×
// head dimension.
func (c Config) KVDim() int { return c.NumKeyValueHeads * c.HeadDim }

// QDim is the width of the queries of one token.
func (c Config) QDim() int { return c.NumAttentionHeads * c.HeadDim }

// IsEOS reports whether id ends a generation.
func (c Config) IsEOS(id int) bool {
	for _, e := range c.EOSTokenIDs {
		if id == e {
			return true
		}
	}
	return false
}

// maxDim bounds every size of a config: larger ones are corrupt files,
// not models.
const maxDim = 1 << 24

// Validate reports the first field that is out of range, naming it.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize},
		{"intermediate_size", c.IntermediateSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"num_key_value_heads", c.NumKeyValueHeads},
		{"head_dim", c.HeadDim}, {"max_position_embeddings", c.MaxPositionEmbeddings},
	} {
		if f.v <= 0 || f.v > maxDim {
			return fmt.Errorf("%s = %d, want in [1, %d]: %w", f.name, f.v, maxDim, ErrConfig)
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d: %w",
			c.NumAttentionHeads, c.NumKeyValueHeads, ErrConfig)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim = %d, want even (rotary embeddings rotate pairs): %w", c.HeadDim, ErrConfig)
	}
	if !(c.RMSNormEps > 0) || c.RMSNormEps > 1 {
		return fmt.Errorf("rms_norm_eps = %g, want in (0, 1]: %w", c.RMSNormEps, ErrConfig)
	}
	if !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0) {
		return fmt.Errorf("rope_theta = %g, want > 1: %w", c.RopeTheta, ErrConfig)
	}
	if r := c.RopeScaling; r != nil {
		if !(r.Factor > 0) || math.IsInf(r.Factor, 0) {
			return fmt.Errorf("rope_scaling.factor = %g, want > 0: %w", r.Factor, ErrConfig)
		}
		switch r.Type {
		case "linear":
		case "llama3":
			if !(r.LowFreqFactor > 0) || !(r.HighFreqFactor > r.LowFreqFactor) {
				return fmt.Errorf("rope_scaling: low_freq_factor %g and high_freq_factor %g, want 0 < low < high: %w",
					r.LowFreqFactor, r.HighFreqFactor, ErrConfig)
			}
			if r.OriginalMaxPositionEmbeddings <= 0 {
				return fmt.Errorf("rope_scaling.original_max_position_embeddings = %d, want > 0: %w",
					r.OriginalMaxPositionEmbeddings, ErrConfig)
			}
		default:
			return fmt.Errorf("rope_scaling type %q is not supported (want null, \"linear\" or \"llama3\"): %w", r.Type, ErrConfig)
		}
	}
	for _, id := range append([]int{c.BOSTokenID}, c.EOSTokenIDs...) {
		if id < 0 || id >= c.VocabSize {
			return fmt.Errorf("special token id %d is outside the vocabulary [0, %d): %w", id, c.VocabSize, ErrConfig)
		}
	}
	return nil
}

// InvFreq returns the rotary inverse frequencies of the head dimension's
// pairs, θ_i = rope_theta^(−2i/head_dim) in float32 as Hugging Face
// computes them, with rope_scaling applied (transformers'
// _compute_linear_scaling_rope_parameters and
// _compute_llama3_parameters).
func (c Config) InvFreq() []float32 {
	half := c.HeadDim / 2
	f := make([]float32, half)
	for i := range f {
		// HF: 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)),
		// the exponent in float32 and the power in float32.
		e := float32(2*i) / float32(c.HeadDim)
		f[i] = float32(1 / float64(float32(math.Pow(c.RopeTheta, float64(e)))))
	}
	r := c.RopeScaling
	if r == nil {
		return f
	}
	switch r.Type {
	case "linear":
		for i := range f {
			f[i] = float32(float64(f[i]) / r.Factor)
		}
	case "llama3":
		old := float64(r.OriginalMaxPositionEmbeddings)
		lowWave, highWave := old/r.LowFreqFactor, old/r.HighFreqFactor
		for i, v := range f {
			wave := 2 * math.Pi / float64(v)
			switch {
			case wave < highWave: // high frequency: kept
			case wave > lowWave: // low frequency: scaled
				f[i] = float32(float64(v) / r.Factor)
			default: // in between: blended
				smooth := (old/wave - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
				f[i] = float32((1-smooth)*float64(v)/r.Factor + smooth*float64(v))
			}
		}
	}
	return f
}

// refused lists config.json keys that, set to anything but the value
// given (or null), make a model this package does not implement.
var refused = map[string]any{
	"model_type":            "llama",
	"hidden_act":            "silu",
	"attention_bias":        false,
	"mlp_bias":              false,
	"partial_rotary_factor": 1.0,
	"sliding_window":        nil,
}

// ParseConfig parses a Hugging Face config.json; name (the file's path)
// appears in errors. Keys that change the computation and are not
// implemented (biases, other activations, quantization, sliding windows)
// are refused by name; keys that do not change it (dropout,
// initializer_range, use_cache, architectures, ...) are ignored.
func ParseConfig(name string, data []byte) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("llama: %s: not a JSON object: %v: %w", name, err, ErrConfig)
	}
	c, err := parseRaw(raw)
	if err != nil {
		return Config{}, fmt.Errorf("llama: %s: %w", name, err)
	}
	return c, nil
}

func parseRaw(raw map[string]json.RawMessage) (Config, error) {
	for key, want := range refused {
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			continue
		}
		var got any
		if err := json.Unmarshal(v, &got); err != nil || got != want {
			accepted := fmt.Sprintf("%v", want)
			if want == nil {
				accepted = "null"
			}
			return Config{}, fmt.Errorf("%s = %s is not supported (only %s): %w", key, v, accepted, ErrConfig)
		}
	}
	c := defaults()
	var headDim, kvHeads *int
	fields := map[string]any{
		"vocab_size": &c.VocabSize, "hidden_size": &c.HiddenSize,
		"intermediate_size": &c.IntermediateSize, "num_hidden_layers": &c.NumHiddenLayers,
		"num_attention_heads": &c.NumAttentionHeads, "num_key_value_heads": &kvHeads,
		"head_dim": &headDim, "rms_norm_eps": &c.RMSNormEps, "rope_theta": &c.RopeTheta,
		"max_position_embeddings": &c.MaxPositionEmbeddings, "tie_word_embeddings": &c.TieWordEmbeddings,
		"bos_token_id": &c.BOSTokenID, "torch_dtype": &c.TorchDType,
	}
	for key, dst := range fields {
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			continue
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return Config{}, fmt.Errorf("%s = %s: %v: %w", key, v, err, ErrConfig)
		}
	}
	if v, ok := raw["eos_token_id"]; ok && string(v) != "null" {
		var one int
		if err := json.Unmarshal(v, &one); err == nil {
			c.EOSTokenIDs = []int{one}
		} else if err := json.Unmarshal(v, &c.EOSTokenIDs); err != nil || len(c.EOSTokenIDs) == 0 {
			return Config{}, fmt.Errorf("eos_token_id = %s: want an int or a non-empty list of ints: %w", v, ErrConfig)
		}
	}
	if v, ok := raw["rope_scaling"]; ok && string(v) != "null" {
		r, err := parseRopeScaling(v)
		if err != nil {
			return Config{}, err
		}
		c.RopeScaling = r
	}
	c.NumKeyValueHeads = c.NumAttentionHeads
	if kvHeads != nil {
		c.NumKeyValueHeads = *kvHeads
	}
	if c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if headDim != nil {
		c.HeadDim = *headDim
	} else if c.NumAttentionHeads > 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		return Config{}, fmt.Errorf("hidden_size %d is not a multiple of num_attention_heads %d and head_dim is absent: %w",
			c.HiddenSize, c.NumAttentionHeads, ErrConfig)
	}
	if v, ok := raw["quantization_config"]; ok && string(v) != "null" {
		q, err := parseQuantization(v)
		if err != nil {
			return Config{}, err
		}
		c.Quant = q
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// parseRopeScaling reads rope_scaling; its type is under "rope_type"
// (transformers ≥ 4.43) or "type" (older configs).
func parseRopeScaling(v json.RawMessage) (*RopeScaling, error) {
	var s struct {
		RopeType       string   `json:"rope_type"`
		Type           string   `json:"type"`
		Factor         *float64 `json:"factor"`
		LowFreqFactor  float64  `json:"low_freq_factor"`
		HighFreqFactor float64  `json:"high_freq_factor"`
		OriginalMax    int      `json:"original_max_position_embeddings"`
	}
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, fmt.Errorf("rope_scaling = %s: %v: %w", v, err, ErrConfig)
	}
	t := s.RopeType
	if t == "" {
		t = s.Type
	}
	if t == "default" {
		return nil, nil
	}
	if s.Factor == nil && (t == "linear" || t == "llama3") {
		return nil, fmt.Errorf("rope_scaling %s has no factor: %w", t, ErrConfig)
	}
	r := &RopeScaling{Type: t, LowFreqFactor: s.LowFreqFactor, HighFreqFactor: s.HighFreqFactor,
		OriginalMaxPositionEmbeddings: s.OriginalMax}
	if s.Factor != nil {
		r.Factor = *s.Factor
	}
	if t != "linear" && t != "llama3" {
		return nil, fmt.Errorf("rope_scaling type %q is not supported (want null, \"linear\" or \"llama3\"): %w", t, ErrConfig)
	}
	return r, nil
}

// LoadConfig reads and parses the config.json at path.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("llama: config: %w", err)
	}
	return ParseConfig(path, data)
}

// JSON returns c as a Hugging Face config.json of LlamaForCausalLM (which
// ParseConfig reads back as c), with its quantization_config when c.Quant
// is set.
func (c Config) JSON() ([]byte, error) {
	m := map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama", "hidden_act": "silu",
		"vocab_size": c.VocabSize, "hidden_size": c.HiddenSize, "intermediate_size": c.IntermediateSize,
		"num_hidden_layers": c.NumHiddenLayers, "num_attention_heads": c.NumAttentionHeads,
		"num_key_value_heads": c.NumKeyValueHeads, "head_dim": c.HeadDim, "rms_norm_eps": c.RMSNormEps,
		"rope_theta": c.RopeTheta, "max_position_embeddings": c.MaxPositionEmbeddings,
		"tie_word_embeddings": c.TieWordEmbeddings, "bos_token_id": c.BOSTokenID, "eos_token_id": c.EOSTokenIDs,
		"attention_bias": false, "mlp_bias": false,
	}
	if len(c.EOSTokenIDs) == 1 {
		m["eos_token_id"] = c.EOSTokenIDs[0]
	}
	if c.TorchDType != "" {
		m["torch_dtype"] = c.TorchDType
	}
	if r := c.RopeScaling; r != nil {
		rs := map[string]any{"rope_type": r.Type, "factor": r.Factor}
		if r.Type == "llama3" {
			rs["low_freq_factor"], rs["high_freq_factor"] = r.LowFreqFactor, r.HighFreqFactor
			rs["original_max_position_embeddings"] = r.OriginalMaxPositionEmbeddings
		}
		m["rope_scaling"] = rs
	}
	if c.Quant != nil {
		m["quantization_config"] = quant.NewConfig(*c.Quant)
	}
	return json.MarshalIndent(m, "", "  ")
}
