package llama

import (
	"errors"
	"fmt"
	"slices"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

// Inputs are one batch of token sequences, row-major [batch, seq], as
// LlamaForCausalLM takes them.
type Inputs struct {
	IDs []int32
	// Mask is Hugging Face's attention_mask: 1 for a token, 0 for padding,
	// on the right or on the left of each row (not in between); nil means
	// no padding.
	Mask []int32
}

// span returns the first real position of each row and the number of
// real tokens, checking the mask.
func (in Inputs) span(batch, seq int) (offset, n []int, err error) {
	if len(in.IDs) != batch*seq {
		return nil, nil, fmt.Errorf("llama: %d input ids for [%d, %d]: %w", len(in.IDs), batch, seq, ErrInput)
	}
	if in.Mask != nil && len(in.Mask) != batch*seq {
		return nil, nil, fmt.Errorf("llama: attention_mask has %d values for [%d, %d]: %w", len(in.Mask), batch, seq, ErrInput)
	}
	offset, n = make([]int, batch), make([]int, batch)
	for b := range batch {
		if in.Mask == nil {
			n[b] = seq
			continue
		}
		row := in.Mask[b*seq : (b+1)*seq]
		first, last := -1, -1
		for i, v := range row {
			switch v {
			case 1:
				if first < 0 {
					first = i
				}
				last = i
			case 0:
			default:
				return nil, nil, fmt.Errorf("llama: attention_mask[%d, %d] = %d, want 0 or 1: %w", b, i, v, ErrInput)
			}
		}
		if first < 0 {
			return nil, nil, fmt.Errorf("llama: attention_mask row %d has no token: %w", b, ErrInput)
		}
		for i := first; i <= last; i++ {
			if row[i] != 1 {
				return nil, nil, fmt.Errorf("llama: attention_mask row %d has padding at %d between tokens; only left or right padding is supported: %w", b, i, ErrInput)
			}
		}
		offset[b], n[b] = first, last-first+1
	}
	return offset, n, nil
}

// Forward returns the logits [batch, seq, vocab] of every position of in,
// in float32. Each row's tokens sit at positions 0…n−1 whatever side its
// padding is on (the positions Hugging Face's generate derives from the
// mask), so padded positions have no logits: they are zero.
func (m *Model) Forward(in Inputs, batch, seq int) ([]float32, error) {
	offset, n, err := in.span(batch, seq)
	if err != nil {
		return nil, err
	}
	s, err := m.NewSession(batch, seq)
	if err != nil {
		return nil, err
	}
	logits, err := s.full(in.IDs, offset, n, seq)
	return logits, errors.Join(err, s.Close())
}

// full runs the rows of ids [batch, seq], each from offset[b] for n[b]
// tokens moved to the front, and returns the logits in the rows' original
// places.
func (s *Session) full(ids []int32, offset, n []int, seq int) ([]float32, error) {
	B, V := s.batch, s.m.Config.VocabSize
	packed := make([]int32, B*seq)
	for b := range B {
		copy(packed[b*seq:], ids[b*seq+offset[b]:b*seq+offset[b]+n[b]])
	}
	clear(s.lens)
	if err := s.run(seq, packed, nil, true); err != nil {
		return nil, err
	}
	got, err := kernels.ToFloat32(s.steps[stepKey{S: seq, full: true}].full)
	if err != nil {
		return nil, fmt.Errorf("llama: logits: %w", err)
	}
	out := make([]float32, B*seq*V)
	for b := range B {
		for i := range n[b] {
			copy(out[(b*seq+offset[b]+i)*V:][:V], got[(b*seq+i)*V:][:V])
		}
	}
	return out, nil
}

// runner is the model as an nn.Runner: Forward over the inputs last set.
type runner struct {
	m          *Model
	batch, seq int
	in         Inputs
	logits     []float32
}

// NewRunner returns the model as an nn.Runner for the shape of in's
// input_ids, [batch, seq]. Its Run is Forward, which downloads the logits.
func (m *Model) NewRunner(in map[string]nn.Values) (nn.Runner, error) {
	batch, seq, err := nn.TokenShape(in)
	if err != nil {
		return nil, fmt.Errorf("llama: %w (%w)", err, ErrInput)
	}
	return &runner{m: m, batch: batch, seq: seq}, nil
}

// Set sets input_ids and, optionally, attention_mask, [batch, seq] each.
func (r *runner) Set(in map[string]nn.Values) error {
	v, err := nn.Inputs(in, true, "input_ids", "attention_mask")
	if err != nil {
		return fmt.Errorf("llama: %w (%w)", err, ErrInput)
	}
	if want := []int{r.batch, r.seq}; !slices.Equal(v[0].Shape, want) {
		return fmt.Errorf("llama: input_ids has shape %v, want %v: %w", v[0].Shape, want, ErrInput)
	}
	if _, _, err := (Inputs{IDs: v[0].I32, Mask: v[1].I32}).span(r.batch, r.seq); err != nil {
		return err
	}
	r.in = Inputs{IDs: v[0].I32, Mask: v[1].I32}
	return nil
}

// Run runs Forward over the inputs last set.
func (r *runner) Run() (err error) {
	r.logits, err = r.m.Forward(r.in, r.batch, r.seq)
	return err
}

// Outputs returns the last pass's logits [batch, seq, vocab].
func (r *runner) Outputs() ([]nn.Named, error) {
	if r.logits == nil {
		return nil, fmt.Errorf("llama: no pass has run: %w", ErrInput)
	}
	return []nn.Named{{Name: "logits", Values: nn.Values{Shape: []int{r.batch, r.seq, r.m.Config.VocabSize}, F32: r.logits}}}, nil
}

// Close does nothing: Forward frees its session.
func (r *runner) Close() error { return nil }

// The model runs through the one run API.
var _ nn.Runnable = (*Model)(nil)
