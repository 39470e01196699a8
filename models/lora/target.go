package lora

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/synth"
)

// Target is one adapted linear layer: the weight W, of shape [Out, In], of
// module Module (one of Modules) in decoder layer Layer.
type Target struct {
	Layer   int
	Module  string
	In, Out int
}

// Path is the module's path inside its decoder layer: "self_attn.q_proj"
// for q_proj, k_proj, v_proj and o_proj, "mlp.gate_proj" for gate_proj,
// up_proj and down_proj.
func (t Target) Path() string { return modulePath(t.Module) }

// modulePath is Target.Path of a module name.
func modulePath(module string) string {
	switch module {
	case "gate_proj", "up_proj", "down_proj":
		return "mlp." + module
	}
	return "self_attn." + module
}

// peftPrefix begins PEFT's saved names of a causal LM's LoRA tensors: the
// PeftModel's base_model (a LoraModel) wraps the LlamaForCausalLM
// (.model), whose decoder is .model.
const peftPrefix = "base_model.model.model.layers."

// Suffixes of A's and B's names after the module's path.
const (
	suffixA = ".lora_A.weight"
	suffixB = ".lora_B.weight"
)

// AName is PEFT's saved name of the target's A, of shape [R, In]:
// base_model.model.model.layers.{Layer}.{Path}.lora_A.weight.
func (t Target) AName() string { return peftPrefix + strconv.Itoa(t.Layer) + "." + t.Path() + suffixA }

// BName is PEFT's saved name of the target's B, of shape [Out, R]:
// base_model.model.model.layers.{Layer}.{Path}.lora_B.weight.
func (t Target) BName() string { return peftPrefix + strconv.Itoa(t.Layer) + "." + t.Path() + suffixB }

// BaseName is the adapted weight's name in the base model's checkpoint:
// model.layers.{Layer}.{Path}.weight.
func (t Target) BaseName() string {
	return "model.layers." + strconv.Itoa(t.Layer) + "." + t.Path() + ".weight"
}

// AShape is A's shape for rank r: [r, In].
func (t Target) AShape(r int) []int { return []int{r, t.In} }

// BShape is B's shape for rank r: [Out, r].
func (t Target) BShape(r int) []int { return []int{t.Out, r} }

// String names the target in messages: "layer 3 mlp.down_proj".
func (t Target) String() string { return fmt.Sprintf("layer %d %s", t.Layer, t.Path()) }

// TargetsOf lists the adapted layers of a model of the given number of
// decoder layers, layer-major and then in Modules' order; dims gives the
// (in, out) sizes of a module's weight.
func (c Config) TargetsOf(layers int, dims func(module string) (in, out int)) []Target {
	var ts []Target
	for l := range layers {
		for _, m := range Modules {
			if c.Targeted(m) {
				in, out := dims(m)
				ts = append(ts, Target{Layer: l, Module: m, In: in, Out: out})
			}
		}
	}
	return ts
}

// Params lists the A and B of every target of ts (A before B per target)
// with the config's rank, as float32 parameters.
func (c Config) Params(ts []Target) []nn.Param {
	ps := make([]nn.Param, 0, 2*len(ts))
	for _, t := range ts {
		ps = append(ps, nn.Param{Name: t.AName(), Shape: t.AShape(c.R)}, nn.Param{Name: t.BName(), Shape: t.BShape(c.R)})
	}
	return ps
}

// tensorName is a parsed PEFT tensor name of a Llama LoRA adapter.
type tensorName struct {
	layer  int
	module string
	isA    bool
}

// parseName parses a name of the form Target.AName or Target.BName gives.
func parseName(name string) (tensorName, bool) {
	rest, ok := strings.CutPrefix(name, peftPrefix)
	if !ok {
		return tensorName{}, false
	}
	num, rest, ok := strings.Cut(rest, ".")
	layer, err := strconv.Atoi(num)
	if !ok || err != nil || layer < 0 || strconv.Itoa(layer) != num {
		return tensorName{}, false
	}
	var n tensorName
	n.layer = layer
	if path, ok := strings.CutSuffix(rest, suffixA); ok {
		n.isA, rest = true, path
	} else if path, ok := strings.CutSuffix(rest, suffixB); ok {
		rest = path
	} else {
		return tensorName{}, false
	}
	for _, m := range Modules {
		if modulePath(m) == rest {
			n.module = m
			return n, true
		}
	}
	return tensorName{}, false
}

// initSource is the Source of Init.
type initSource struct{ seed uint64 }

// Init returns PEFT's default initialisation of LoRA weights as an
// nn.Source: every A Kaiming-uniform with a = √5 (PyTorch's
// kaiming_uniform_(A, a=math.sqrt(5)), uniform in ±1/√In, In being A's
// fan-in), drawn from package synth's stream of A's name under seed
// (synth.Uniform(seed, name, n, 0, 1/√In)); every B zero. A parameter not
// named as the A or B of a target, or not two-dimensional, is an error
// wrapping nn.ErrWeights.
func Init(seed uint64) nn.Source { return initSource{seed} }

// Values implements nn.Source.
func (s initSource) Values(p nn.Param) ([]float32, error) {
	n, ok := parseName(p.Name)
	if !ok {
		return nil, fmt.Errorf("LoRA init: %q is not the name of a LoRA A or B: %w", p.Name, nn.ErrWeights)
	}
	if len(p.Shape) != 2 || slices.Min(p.Shape) <= 0 {
		return nil, fmt.Errorf("LoRA init: %q: shape %v, want two positive dimensions: %w", p.Name, p.Shape, nn.ErrWeights)
	}
	if !n.isA {
		return make([]float32, p.Len()), nil
	}
	// torch: gain = √(2/(1+a²)) = √(1/3), bound = gain·√(3/fan_in) = 1/√fan_in.
	bound := 1 / math.Sqrt(float64(p.Shape[1]))
	return synth.Uniform(s.seed, p.Name, p.Len(), 0, bound), nil
}
