package nn

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zbench/zbench/kernels"
)

// Values is one named input or output of a model on the host: its shape
// and its values, float32, or int32 for token ids and masks.
type Values struct {
	Shape []int
	F32   []float32
	I32   []int32
}

// Named is a model output and its name (last_hidden_state, logits, …).
type Named struct {
	Name string
	Values
}

// Runner runs a model's forward pass over buffers allocated once for one
// input shape: named inputs in (Set), named outputs out (Outputs). It is
// the one way to run any model, which the benchmarks (timing Run), the
// infer command and the golden tests share.
type Runner interface {
	// Set checks the named inputs against the runner's shape and the
	// model and copies them to the device.
	Set(in map[string]Values) error
	// Run queues the forward pass of the inputs last set.
	Run() error
	// Outputs returns the last pass's outputs in the model's order.
	Outputs() ([]Named, error)
	// Close frees the runner's buffers.
	Close() error
}

// Runnable is a model on a device that makes runners for its inputs.
type Runnable interface {
	// NewRunner returns a runner for inputs of in's shapes.
	NewRunner(in map[string]Values) (Runner, error)
	// Close frees the model.
	Close() error
}

// Inputs checks that in holds only the tensors named, the first of them
// required, and returns the values of each name (nil where absent):
// int32 ones of one shape when ints, else float32 ones. Errors name the
// tensor and wrap kernels.ErrValue or kernels.ErrShape.
func Inputs(in map[string]Values, ints bool, names ...string) ([]Values, error) {
	for n := range in {
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("unexpected input %q (want %s, optionally %s): %w", n, names[0], strings.Join(names[1:], ", "), kernels.ErrValue)
		}
	}
	out := make([]Values, len(names))
	for i, n := range names {
		v, ok := in[n]
		switch {
		case !ok && i == 0:
			return nil, fmt.Errorf("no input %q (have %v): %w", n, slices.Sorted(maps.Keys(in)), kernels.ErrValue)
		case !ok:
			continue
		case ints && v.I32 == nil:
			return nil, fmt.Errorf("input %q: want integer values: %w", n, kernels.ErrDType)
		case !ints && v.F32 == nil:
			return nil, fmt.Errorf("input %q: want floating-point values: %w", n, kernels.ErrDType)
		case ints && i > 0 && !slices.Equal(v.Shape, out[0].Shape):
			return nil, fmt.Errorf("input %q has shape %v, want %v as %s: %w", n, v.Shape, out[0].Shape, names[0], kernels.ErrShape)
		}
		if l := max(len(v.I32), len(v.F32)); l != kernels.Shape(v.Shape).Len() {
			return nil, fmt.Errorf("input %q has %d values for shape %v: %w", n, l, v.Shape, kernels.ErrShape)
		}
		out[i] = v
	}
	return out, nil
}

// TokenShape returns the batch and sequence length of input_ids [batch,
// seq] in in.
func TokenShape(in map[string]Values) (batch, seq int, err error) {
	v, ok := in["input_ids"]
	switch {
	case !ok:
		return 0, 0, fmt.Errorf("no input %q: %w", "input_ids", kernels.ErrValue)
	case len(v.Shape) != 2 || v.Shape[0] <= 0 || v.Shape[1] <= 0:
		return 0, 0, fmt.Errorf("input %q has shape %v, want [batch, seq], both > 0: %w", "input_ids", v.Shape, kernels.ErrShape)
	}
	return v.Shape[0], v.Shape[1], nil
}
