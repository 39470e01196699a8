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

// TokenLengths checks token ids [batch, seq] against a vocabulary of
// vocab ids and Hugging Face's attention_mask (nil: no padding; else right
// padding, each row 1…1 0…0 with at least one token), and returns each
// sequence's tokens. Errors name the tensor and the position; callers wrap
// them with their model's sentinel.
func TokenLengths(ids, mask []int32, batch, seq, vocab int) ([]int32, error) {
	n := batch * seq
	if len(ids) != n {
		return nil, fmt.Errorf("input_ids has %d values, want batch·seq = %d·%d", len(ids), batch, seq)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return nil, fmt.Errorf("input_ids[%d, %d] = %d is outside the vocabulary [0, %d)", i/seq, i%seq, id, vocab)
		}
	}
	lens := make([]int32, batch)
	for b := range lens {
		lens[b] = int32(seq)
	}
	if mask == nil {
		return lens, nil
	}
	if len(mask) != n {
		return nil, fmt.Errorf("attention_mask has %d values, want %d", len(mask), n)
	}
	for b := range batch {
		row := mask[b*seq : (b+1)*seq]
		l := 0
		for l < seq && row[l] == 1 {
			l++
		}
		for j := l; j < seq; j++ {
			if row[j] != 0 {
				return nil, fmt.Errorf("attention_mask row %d is not 1…1 0…0 (value %d at %d; only right padding is supported)", b, row[j], j)
			}
		}
		if l == 0 {
			return nil, fmt.Errorf("attention_mask row %d has no tokens", b)
		}
		lens[b] = int32(l)
	}
	return lens, nil
}

// RunSteps calls steps in order and returns the first error: a model's
// sequence of ops, each a closure over its buffers.
func RunSteps(steps ...func() error) error {
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}
