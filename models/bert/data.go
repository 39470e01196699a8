package bert

import (
	"fmt"
	"math/rand/v2"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

// Masking is BERT's masked-LM recipe.
type Masking struct {
	// Rate is the fraction of each sequence's tokens to predict (0.15);
	// every sequence gets round(Rate·seq) of them, at least one, so that
	// every batch has the same number.
	Rate float64
	// MaskID replaces 80% of the chosen tokens, a random id 10%, and 10%
	// stay as they are.
	MaskID int32
	// Vocab bounds the random replacements.
	Vocab int
}

// Batch cuts batch sequences of seq tokens at random offsets from c and
// masks them.
func (m Masking) Batch(c nn.Corpus, r *rand.Rand, batch, seq int) (Batch, error) {
	switch {
	case batch <= 0 || seq <= 0:
		return Batch{}, fmt.Errorf("bert: batch %d, seq %d: want both > 0: %w", batch, seq, ErrInput)
	case m.Vocab <= 0 || m.MaskID < 0 || int(m.MaskID) >= m.Vocab:
		return Batch{}, fmt.Errorf("bert: masking: mask id %d, vocabulary %d: want 0 ≤ id < vocabulary: %w", m.MaskID, m.Vocab, ErrInput)
	case !(m.Rate > 0 && m.Rate <= 1):
		return Batch{}, fmt.Errorf("bert: masking rate %g: want it in (0, 1]: %w", m.Rate, ErrInput)
	}
	if len(c.IDs) < seq {
		return Batch{}, fmt.Errorf("bert: corpus %s has %d tokens, fewer than seq %d: %w", c.Name, len(c.IDs), seq, ErrInput)
	}
	k := max(1, int(m.Rate*float64(seq)+0.5))
	b := Batch{IDs: make([]int32, batch*seq), Labels: make([]int32, batch*seq)}
	for row := range batch {
		off := r.IntN(len(c.IDs) - seq + 1)
		ids, labels := b.IDs[row*seq:(row+1)*seq], b.Labels[row*seq:(row+1)*seq]
		copy(ids, c.IDs[off:off+seq])
		for i := range labels {
			labels[i] = kernels.IgnoreIndex
		}
		for _, p := range r.Perm(seq)[:k] {
			labels[p] = ids[p]
			switch u := r.Float64(); {
			case u < 0.8:
				ids[p] = m.MaskID
			case u < 0.9:
				ids[p] = int32(r.IntN(m.Vocab))
			}
		}
	}
	return b, nil
}
