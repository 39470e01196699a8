package quant

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/zbench/zbench/kernels"
)

// Scheme is how a checkpoint's linear layers are quantized.
type Scheme string

// Schemes.
const (
	// W8A8 is int8 weights, one scale per output channel, and int8
	// inputs with one static scale per tensor from calibration: each
	// quantized Linear X stores X.weight (I8 [out, in]), X.weight_scale
	// (F32 [out, 1]) and X.input_scale (F32 [1]).
	W8A8 Scheme = "w8a8"
)

// Schemes lists the schemes checkpoints are written and read in.
func Schemes() []string { return []string{string(W8A8)} }

// ParseScheme parses a --scheme value.
func ParseScheme(s string) (Scheme, error) {
	if !slices.Contains(Schemes(), s) {
		return "", fmt.Errorf("quant: unknown scheme %q (want one of %s): %w", s, strings.Join(Schemes(), ", "), kernels.ErrValue)
	}
	return Scheme(s), nil
}

// args is one "weights" or "input_activations" entry of a compressed-tensors
// config group.
type args struct {
	NumBits   int     `json:"num_bits"`
	Type      string  `json:"type"`
	Symmetric bool    `json:"symmetric"`
	Strategy  string  `json:"strategy"`
	Dynamic   bool    `json:"dynamic"`
	GroupSize *int    `json:"group_size"`
	Observer  string  `json:"observer,omitempty"`
	Actorder  *string `json:"actorder"`
}

// group is one entry of config_groups.
type group struct {
	Targets           []string `json:"targets"`
	Weights           *args    `json:"weights"`
	InputActivations  *args    `json:"input_activations"`
	OutputActivations *args    `json:"output_activations"`
}

// Config is the quantization_config of a Hugging Face config.json in the
// compressed-tensors layout that vLLM and llm-compressor read.
type Config struct {
	QuantMethod        string           `json:"quant_method"`
	Format             string           `json:"format"`
	QuantizationStatus string           `json:"quantization_status"`
	ConfigGroups       map[string]group `json:"config_groups"`
	Ignore             []string         `json:"ignore"`
	KVCacheScheme      *json.RawMessage `json:"kv_cache_scheme"`
}

// NewConfig returns the quantization_config of scheme s, the calibration
// method named in the input activations' observer, the modules named in
// ignore left in floating point.
func NewConfig(s Scheme, method string, ignore []string) Config {
	return Config{
		QuantMethod:        "compressed-tensors",
		Format:             "int-quantized",
		QuantizationStatus: "compressed",
		ConfigGroups: map[string]group{"group_0": {
			Targets:          []string{"Linear"},
			Weights:          &args{NumBits: 8, Type: "int", Symmetric: true, Strategy: "channel", Observer: "minmax"},
			InputActivations: &args{NumBits: 8, Type: "int", Symmetric: true, Strategy: "tensor", Observer: method},
		}},
		Ignore: append([]string{}, ignore...),
	}
}

// ParseConfig reads a quantization_config (raw JSON, the value of that key
// of config.json; name is the file, for errors) and returns its scheme
// and ignored modules. Anything but what NewConfig writes for a scheme is
// an error naming the field: a checkpoint quantized some other way is not
// run under a wrong scheme.
func ParseConfig(name string, raw json.RawMessage) (Scheme, []string, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", nil, fmt.Errorf("%s: quantization_config: %v: %w", name, err, kernels.ErrValue)
	}
	bad := func(field string, got any, want string) error {
		return fmt.Errorf("%s: quantization_config: %s = %v, want %s: %w", name, field, got, want, kernels.ErrValue)
	}
	switch {
	case c.QuantMethod != "compressed-tensors":
		return "", nil, bad("quant_method", c.QuantMethod, "compressed-tensors")
	case c.Format != "int-quantized":
		return "", nil, bad("format", c.Format, "int-quantized")
	case c.QuantizationStatus != "compressed":
		return "", nil, bad("quantization_status", c.QuantizationStatus, "compressed")
	case len(c.ConfigGroups) != 1:
		return "", nil, bad("config_groups", len(c.ConfigGroups), "one group")
	}
	for gname, g := range c.ConfigGroups {
		field := "config_groups." + gname
		if !slices.Equal(g.Targets, []string{"Linear"}) {
			return "", nil, bad(field+".targets", g.Targets, `["Linear"]`)
		}
		if g.OutputActivations != nil {
			return "", nil, bad(field+".output_activations", "set", "null")
		}
		for _, a := range []struct {
			field    string
			a        *args
			strategy string
		}{{".weights", g.Weights, "channel"}, {".input_activations", g.InputActivations, "tensor"}} {
			f := field + a.field
			switch {
			case a.a == nil:
				return "", nil, bad(f, "null", "int8 "+a.strategy)
			case a.a.NumBits != 8 || a.a.Type != "int":
				return "", nil, bad(f, fmt.Sprintf("%d-bit %s", a.a.NumBits, a.a.Type), "8-bit int")
			case !a.a.Symmetric:
				return "", nil, bad(f+".symmetric", false, "true")
			case a.a.Strategy != a.strategy:
				return "", nil, bad(f+".strategy", a.a.Strategy, a.strategy)
			case a.a.Dynamic:
				return "", nil, bad(f+".dynamic", true, "false")
			case a.a.GroupSize != nil:
				return "", nil, bad(f+".group_size", *a.a.GroupSize, "null")
			}
		}
	}
	return W8A8, c.Ignore, nil
}
