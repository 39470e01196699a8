package llama

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
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
	got, err := kernels.ToFloat32(s.steps[stepKey{seq, true}].full)
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
