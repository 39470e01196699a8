package nn

import (
	"errors"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/synth"
)

// ErrWeights marks weights that do not fit the model's config: a missing
// tensor, a wrong shape or dtype, a tensor the config has no place for.
var ErrWeights = errors.New("bad weights")

// Param is one parameter of a model: its name (the model's choice, as a
// rule its Hugging Face name) and its shape.
type Param struct {
	Name  string
	Shape []int
}

// Len is the number of elements.
func (p Param) Len() int { return kernels.Shape(p.Shape).Len() }

// Source supplies parameter values by name.
type Source interface {
	// Values returns the parameter's values, row-major, as float32. A
	// missing tensor or one of another shape is an error wrapping
	// ErrWeights.
	Values(p Param) ([]float32, error)
}

// synthetic is the seeded generator of package synth with a model's
// ranges.
type synthetic struct {
	seed   uint64
	ranges func(p Param) (center, half float64)
}

// Synthetic returns seeded synthetic weights: each parameter's values are
// package synth's stream of its name under seed, uniform in center ± half
// as ranges gives them for the name. A model's reference script implements
// the same ranges, so that goldens of full-size models store only inputs
// and outputs.
func Synthetic(seed uint64, ranges func(name string) (center, half float64)) Source {
	return synthetic{seed, func(p Param) (float64, float64) { return ranges(p.Name) }}
}

// SyntheticShaped is Synthetic with ranges that depend on the parameter's
// shape as well as its name (a fan-in scaled initialisation).
func SyntheticShaped(seed uint64, ranges func(p Param) (center, half float64)) Source {
	return synthetic{seed, ranges}
}

func (s synthetic) Values(p Param) ([]float32, error) {
	c, h := s.ranges(p)
	return synth.Uniform(s.seed, p.Name, p.Len(), c, h), nil
}
