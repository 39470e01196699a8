// Package lora implements LoRA adapters as Hugging Face PEFT defines them,
// for Llama-family models.
//
// An adapter of rank r on a linear layer y = W·x (W of shape [Out, In])
// adds Scale·B·A·x, with A of shape [r, In], B of shape [Out, r] and Scale
// = lora_alpha/r, or lora_alpha/√r with use_rslora. Training changes only A
// and B; B starts at zero, so a new adapter leaves the model's output
// unchanged. Dropout, when training, applies to the adapter's input x only.
//
// The package reads and writes PEFT's files: adapter_config.json (a
// Config) and adapter_model.safetensors (every target's A and B, under
// PEFT's tensor names). PEFT features that change the computation beyond
// plain LoRA (DoRA, biases, per-layer ranks, regular-expression targets,
// modules_to_save, ...) are rejected with an error naming the field, never
// silently ignored.
//
// Errors about a configuration wrap ErrConfig; errors about tensors wrap
// nn.ErrWeights. Both name the file, field or tensor concerned.
package lora

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// ErrConfig marks an invalid or unsupported adapter configuration.
var ErrConfig = errors.New("bad LoRA config")

// Modules are the linear layers of a Llama decoder layer that LoRA can
// adapt, in PEFT's target_modules spelling, in this order.
var Modules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// DefaultTargets is PEFT's default for Llama: q_proj, v_proj (its
// target_modules when a config gives none).
var DefaultTargets = []string{"q_proj", "v_proj"}

// AllLinear is PEFT's shorthand for every linear layer but the output
// head: for Llama, all of Modules.
const AllLinear = "all-linear"

// Config is an adapter's hyper-parameters: the fields of
// adapter_config.json that change the computation.
type Config struct {
	R         int      // rank, > 0 (r)
	Alpha     float64  // lora_alpha
	Dropout   float64  // lora_dropout, in [0, 1)
	Targets   []string // target_modules: a subset of Modules, in Modules' order, no duplicates
	RSLoRA    bool     // use_rslora: scale by Alpha/√R instead of Alpha/R
	BaseModel string   // base_model_name_or_path, informational
}

// Default returns the usual fine-tuning setting for Llama: rank 8, alpha
// 32, dropout 0.1, targets q_proj and v_proj. (PEFT's own defaults are
// alpha 8 and dropout 0.)
func Default() Config {
	return Config{R: 8, Alpha: 32, Dropout: 0.1, Targets: slices.Clone(DefaultTargets)}
}

// Validate checks the config's fields. An error names the field (in
// adapter_config.json's spelling) and wraps ErrConfig.
func (c Config) Validate() error {
	switch {
	case c.R <= 0:
		return fmt.Errorf("r = %d: the rank must be > 0: %w", c.R, ErrConfig)
	case math.IsNaN(c.Alpha) || math.IsInf(c.Alpha, 0):
		return fmt.Errorf("lora_alpha = %v: must be a finite number: %w", c.Alpha, ErrConfig)
	case !(c.Dropout >= 0 && c.Dropout < 1):
		return fmt.Errorf("lora_dropout = %v: must be in [0, 1): %w", c.Dropout, ErrConfig)
	case len(c.Targets) == 0:
		return fmt.Errorf("target_modules is empty: name at least one of %s: %w", validNames(), ErrConfig)
	}
	last := -1
	for _, m := range c.Targets {
		i := slices.Index(Modules, m)
		switch {
		case i < 0:
			return fmt.Errorf("target_modules: unknown module %q; valid: %s: %w", m, validNames(), ErrConfig)
		case i == last:
			return fmt.Errorf("target_modules %v: %q twice: %w", c.Targets, m, ErrConfig)
		case i < last:
			return fmt.Errorf("target_modules %v: not in the order %s (ParseTargets sorts them): %w",
				c.Targets, strings.Join(Modules, ", "), ErrConfig)
		}
		last = i
	}
	return nil
}

// Scale is the factor of the adapter's output: Alpha/R, or Alpha/√R with
// RSLoRA.
func (c Config) Scale() float64 {
	if c.RSLoRA {
		return c.Alpha / math.Sqrt(float64(c.R))
	}
	return c.Alpha / float64(c.R)
}

// Targeted reports whether the config adapts module.
func (c Config) Targeted(module string) bool { return slices.Contains(c.Targets, module) }

// validNames lists the names ParseTargets accepts, for messages.
func validNames() string { return strings.Join(Modules, ", ") + " or " + AllLinear }

// ParseTargets parses a comma-separated list of module names ("q_proj,
// v_proj"; spaces around names are trimmed), "all-linear" standing for all
// of Modules as in PEFT. The result is in Modules' order without
// duplicates. An empty or unknown name is an error listing the valid ones,
// wrapping ErrConfig.
func ParseTargets(s string) ([]string, error) {
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == AllLinear:
			for _, m := range Modules {
				seen[m] = true
			}
		case slices.Contains(Modules, name):
			seen[name] = true
		case name == "":
			return nil, fmt.Errorf("target modules %q: empty name; valid: %s: %w", s, validNames(), ErrConfig)
		default:
			return nil, fmt.Errorf("target modules %q: unknown module %q; valid: %s: %w", s, name, validNames(), ErrConfig)
		}
	}
	return inOrder(seen), nil
}

// inOrder returns the modules of set in Modules' order.
func inOrder(set map[string]bool) []string {
	out := []string{}
	for _, m := range Modules {
		if set[m] {
			out = append(out, m)
		}
	}
	return out
}
