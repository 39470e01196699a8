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
	// inputs, symmetric per tensor: with one static scale from
	// calibration (compressed-tensors' "int-quantized" format: each
	// quantized Linear X stores X.weight I8 [out, in], X.weight_scale F32
	// [out, 1] and X.input_scale F32 [1]), or dynamic, one scale per
	// token computed as the model runs (no input_scale).
	W8A8 Scheme = "w8a8"
	// W8A16 is weight-only int8, one scale per output channel, the
	// inputs in floating point ("pack-quantized": X.weight_packed I32
	// [out, in/4], four codes per word as code+128 from the low byte up,
	// X.weight_scale [out, 1] and X.weight_shape [2] = [out, in]).
	W8A16 Scheme = "w8a16"
	// W4A16 is weight-only int4, one scale per group of values along the
	// input ("pack-quantized": X.weight_packed I32 [out, in/8], eight
	// codes per word as code+8 from the low nibble up, X.weight_scale
	// [out, in/group] and X.weight_shape).
	W4A16 Scheme = "w4a16"
)

// FP8 is FP8 E4M3 weights, one scale per output channel, and E4M3 inputs
// with a scale per token computed as the model runs: llm-compressor's
// FP8_DYNAMIC ("float-quantized": X.weight F8_E4M3 [out, in] and
// X.weight_scale [out, 1], the inverse scale, x ≈ code·scale).
const FP8 Scheme = "fp8"

// Schemes lists the schemes checkpoints are written and read in.
func Schemes() []string {
	return []string{string(W8A8), string(W8A16), string(W4A16), string(NF4), string(FP8)}
}

// ParseScheme parses a --scheme value.
func ParseScheme(s string) (Scheme, error) {
	if !slices.Contains(Schemes(), s) {
		return "", fmt.Errorf("quant: unknown scheme %q (want one of %s): %w", s, strings.Join(Schemes(), ", "), kernels.ErrValue)
	}
	return Scheme(s), nil
}

// WeightOnly reports whether s quantizes the weights alone, and their
// format.
func (s Scheme) WeightOnly() (kernels.WeightFormat, bool) {
	switch s {
	case W8A16:
		return kernels.WInt8, true
	case NF4:
		return kernels.WNF4, true
	case W4A16:
		return kernels.WInt4, true
	}
	return 0, false
}

// Spec is a quantized checkpoint's recipe: what its config.json's
// quantization_config says (NewConfig writes it, ParseConfig reads it).
type Spec struct {
	Scheme Scheme
	// Dynamic is W8A8's per-token input scales, computed at run time.
	Dynamic bool
	// Group is W4A16's values per scale along the input.
	Group int
	// Method names the calibration observer of W8A8's static input
	// scales (written as the observer, not read back).
	Method string
	// Ignore lists the modules left in floating point.
	Ignore []string
	// Targets are the classes of the modules quantized, compressed-tensors'
	// "targets": nil (or empty) for ["Linear"], the linear layers of a
	// transformer; a convolutional network's are ["Conv2d", "Linear"]
	// (ConvTargets). ParseConfig accepts these two and returns nil for
	// the first.
	Targets []string
}

// linearTargets and convTargets are the targets NewConfig writes and
// ParseConfig reads.
var (
	linearTargets = []string{"Linear"}
	convTargets   = []string{"Conv2d", "Linear"}
)

// ConvTargets returns the Targets of a convolutional network quantized
// whole: every Conv2d and Linear module.
func ConvTargets() []string { return slices.Clone(convTargets) }

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

// Compressed-tensors' formats.
const (
	formatInt    = "int-quantized"
	formatPacked = "pack-quantized"
	formatFloat  = "float-quantized"
)

// NewConfig returns the quantization_config of s: compressed-tensors'
// (a Config), or bitsandbytes' for NF4.
func NewConfig(s Spec) any {
	if s.Scheme == NF4 {
		return newBNBConfig(s)
	}
	g := group{Targets: slices.Clone(linearTargets)}
	if len(s.Targets) > 0 {
		g.Targets = slices.Clone(s.Targets)
	}
	format := formatInt
	switch s.Scheme {
	case W8A8:
		g.Weights = &args{NumBits: 8, Type: "int", Symmetric: true, Strategy: "channel", Observer: "minmax"}
		g.InputActivations = &args{NumBits: 8, Type: "int", Symmetric: true, Strategy: "tensor", Observer: s.Method}
		if s.Dynamic {
			g.InputActivations = &args{NumBits: 8, Type: "int", Symmetric: true, Strategy: "token", Dynamic: true}
		}
	case W8A16:
		format = formatPacked
		g.Weights = &args{NumBits: 8, Type: "int", Symmetric: true, Strategy: "channel", Observer: "minmax"}
	case W4A16:
		format = formatPacked
		size := s.Group
		g.Weights = &args{NumBits: 4, Type: "int", Symmetric: true, Strategy: "group", GroupSize: &size, Observer: "minmax"}
	case FP8:
		format = formatFloat
		g.Weights = &args{NumBits: 8, Type: "float", Symmetric: true, Strategy: "channel", Observer: "minmax"}
		g.InputActivations = &args{NumBits: 8, Type: "float", Symmetric: true, Strategy: "token", Dynamic: true}
	}
	return Config{
		QuantMethod:        "compressed-tensors",
		Format:             format,
		QuantizationStatus: "compressed",
		ConfigGroups:       map[string]group{"group_0": g},
		Ignore:             append([]string{}, s.Ignore...),
	}
}

// ParseConfig reads a quantization_config (raw JSON, the value of that key
// of config.json; name is the file, for errors, or "" when the caller
// names it) and returns its recipe (Method left empty; Ignore nil when
// empty, Targets nil when ["Linear"]). Anything but what NewConfig writes
// for some Spec is an error naming the field: a checkpoint quantized some
// other way (asymmetric, activation-ordered, another bit width) is not run
// under a wrong scheme.
func ParseConfig(name string, raw json.RawMessage) (Spec, error) {
	prefix := "quantization_config"
	if name != "" {
		prefix = name + ": " + prefix
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Spec{}, fmt.Errorf("%s: %v: %w", prefix, err, kernels.ErrValue)
	}
	bad := func(field string, got any, want string) error {
		return fmt.Errorf("%s: %s = %v, want %s: %w", prefix, field, got, want, kernels.ErrValue)
	}
	switch {
	case c.QuantMethod == "bitsandbytes":
		return parseBNB(raw, bad)
	case c.QuantMethod != "compressed-tensors":
		return Spec{}, bad("quant_method", c.QuantMethod, "compressed-tensors or bitsandbytes")
	case c.Format != formatInt && c.Format != formatPacked && c.Format != formatFloat:
		return Spec{}, bad("format", c.Format, formatInt+", "+formatPacked+" or "+formatFloat)
	case c.QuantizationStatus != "compressed":
		return Spec{}, bad("quantization_status", c.QuantizationStatus, "compressed")
	case len(c.ConfigGroups) != 1:
		return Spec{}, bad("config_groups", len(c.ConfigGroups), "one group")
	}
	for gname, g := range c.ConfigGroups {
		s, err := parseGroup(c.Format, "config_groups."+gname, g, bad)
		if err != nil {
			return Spec{}, err
		}
		if len(c.Ignore) > 0 { // none, absent or [], is nil
			s.Ignore = c.Ignore
		}
		return s, nil
	}
	panic("unreachable")
}

// parseGroup reads the one config group g of a config in format; field
// names it in errors, made by bad.
func parseGroup(format, field string, g group, bad func(field string, got any, want string) error) (Spec, error) {
	var targets []string
	switch {
	case slices.Equal(g.Targets, linearTargets):
	case slices.Equal(g.Targets, convTargets):
		targets = slices.Clone(convTargets)
	default:
		return Spec{}, bad(field+".targets", g.Targets, `["Linear"] or ["Conv2d", "Linear"]`)
	}
	if g.OutputActivations != nil {
		return Spec{}, bad(field+".output_activations", "set", "null")
	}
	w, in := g.Weights, g.InputActivations
	if format == formatFloat {
		return parseFloatGroup(field, w, in, bad)
	}
	f := field + ".weights"
	switch {
	case w == nil:
		return Spec{}, bad(f, "null", "int weights")
	case w.Type != "int":
		return Spec{}, bad(f+".type", w.Type, "int")
	case !w.Symmetric:
		return Spec{}, bad(f+".symmetric", false, "true")
	case w.Dynamic:
		return Spec{}, bad(f+".dynamic", true, "false")
	case w.Actorder != nil:
		return Spec{}, bad(f+".actorder", *w.Actorder, "null")
	}
	s := Spec{Targets: targets}
	switch {
	case in != nil && format == formatInt:
		s.Scheme = W8A8
	case in == nil && format == formatPacked && w.NumBits == 8:
		s.Scheme = W8A16
	case in == nil && format == formatPacked && w.NumBits == 4:
		s.Scheme = W4A16
	case in == nil && format == formatPacked:
		return Spec{}, bad(f+".num_bits", w.NumBits, "8 or 4")
	case in == nil:
		return Spec{}, bad(field+".input_activations", "null", "int8 inputs in "+formatInt+"; weight-only int8 or int4 in "+formatPacked)
	default:
		return Spec{}, bad(field+".input_activations", "set", "null in "+formatPacked)
	}
	wantBits, wantStrategy := 8, "channel"
	if s.Scheme == W4A16 {
		wantBits, wantStrategy = 4, "group"
	}
	switch {
	case w.NumBits != wantBits:
		return Spec{}, bad(f+".num_bits", w.NumBits, fmt.Sprint(wantBits))
	case w.Strategy != wantStrategy:
		return Spec{}, bad(f+".strategy", w.Strategy, wantStrategy)
	case wantStrategy == "group" && (w.GroupSize == nil || *w.GroupSize <= 0):
		return Spec{}, bad(f+".group_size", w.GroupSize, "a positive group size")
	case wantStrategy == "channel" && w.GroupSize != nil:
		return Spec{}, bad(f+".group_size", *w.GroupSize, "null")
	}
	if w.GroupSize != nil {
		s.Group = *w.GroupSize
	}
	if s.Scheme != W8A8 {
		return s, nil
	}
	f = field + ".input_activations"
	switch {
	case in.NumBits != 8 || in.Type != "int":
		return Spec{}, bad(f, fmt.Sprintf("%d-bit %s", in.NumBits, in.Type), "8-bit int")
	case !in.Symmetric:
		return Spec{}, bad(f+".symmetric", false, "true")
	case in.GroupSize != nil:
		return Spec{}, bad(f+".group_size", *in.GroupSize, "null")
	case in.Actorder != nil:
		return Spec{}, bad(f+".actorder", *in.Actorder, "null")
	case in.Dynamic && in.Strategy != "token":
		return Spec{}, bad(f+".strategy", in.Strategy, "token for dynamic inputs")
	case !in.Dynamic && in.Strategy != "tensor":
		return Spec{}, bad(f+".strategy", in.Strategy, "tensor for static inputs")
	}
	s.Dynamic = in.Dynamic
	return s, nil
}

// parseFloatGroup reads the weights and inputs of a "float-quantized"
// group: FP8 weights per channel and FP8 inputs per token, dynamic (FP8).
func parseFloatGroup(field string, w, in *args, bad func(field string, got any, want string) error) (Spec, error) {
	for _, a := range []struct {
		name     string
		a        *args
		strategy string
		dynamic  bool
	}{{".weights", w, "channel", false}, {".input_activations", in, "token", true}} {
		f := field + a.name
		switch {
		case a.a == nil:
			return Spec{}, bad(f, "null", "8-bit float "+a.strategy)
		case a.a.NumBits != 8 || a.a.Type != "float":
			return Spec{}, bad(f, fmt.Sprintf("%d-bit %s", a.a.NumBits, a.a.Type), "8-bit float")
		case !a.a.Symmetric:
			return Spec{}, bad(f+".symmetric", false, "true")
		case a.a.Strategy != a.strategy:
			return Spec{}, bad(f+".strategy", a.a.Strategy, a.strategy)
		case a.a.Dynamic != a.dynamic:
			return Spec{}, bad(f+".dynamic", a.a.Dynamic, fmt.Sprint(a.dynamic))
		case a.a.GroupSize != nil:
			return Spec{}, bad(f+".group_size", *a.a.GroupSize, "null")
		case a.a.Actorder != nil:
			return Spec{}, bad(f+".actorder", *a.a.Actorder, "null")
		}
	}
	return Spec{Scheme: FP8, Dynamic: true}, nil
}
