package bert

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/zbench/zbench/kernels"
)

// Corpus is a stream of token ids that masked-LM batches are cut from.
type Corpus struct {
	Name string
	IDs  []int32
}

// SyntheticCorpus returns n seeded tokens with a Zipf (s = 1.1)
// distribution over ids [first, vocab), natural text's shape of frequent
// and rare tokens; ids below first (special tokens) never occur. It needs
// 0 ≤ first < vocab.
func SyntheticCorpus(seed uint64, vocab, first, n int) (Corpus, error) {
	if first < 0 || first >= vocab || n < 0 {
		return Corpus{}, fmt.Errorf("bert: synthetic corpus of ids [%d, %d), %d tokens: want 0 ≤ first < vocab, n ≥ 0: %w",
			first, vocab, n, ErrInput)
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	z := rand.NewZipf(r, 1.1, 1, uint64(vocab-first-1))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(first) + int32(z.Uint64())
	}
	return Corpus{Name: fmt.Sprintf("synthetic(seed=%d)", seed), IDs: ids}, nil
}

// ReadCorpus reads a training file for a vocabulary of vocab ids. A file
// whose whitespace-separated fields are all decimal integers is a token-id
// file; anything else must be UTF-8 text, which is tokenised byte by byte
// onto the last 256 ids of the vocabulary (no WordPiece vocabulary is
// needed: the model learns the byte stream).
func ReadCorpus(path string, vocab int) (Corpus, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Corpus{}, fmt.Errorf("bert: corpus: %w", err)
	}
	fields := bytes.Fields(data)
	if len(fields) == 0 {
		return Corpus{}, fmt.Errorf("bert: corpus %s is empty: %w", path, ErrInput)
	}
	ids := make([]int32, 0, len(fields))
	for _, f := range fields {
		v, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			ids = nil
			break
		}
		ids = append(ids, int32(max(-1, min(v, int64(vocab))))) // range-checked below
	}
	if ids != nil {
		for i, v := range ids {
			if v < 0 || int(v) >= vocab {
				return Corpus{}, fmt.Errorf("bert: corpus %s: token %d is id %s, outside the vocabulary [0, %d): %w",
					path, i, fields[i], vocab, ErrInput)
			}
		}
		return Corpus{Name: path, IDs: ids}, nil
	}
	if !utf8.Valid(data) {
		return Corpus{}, fmt.Errorf("bert: corpus %s is neither token ids nor UTF-8 text: %w", path, ErrInput)
	}
	if vocab < 512 {
		return Corpus{}, fmt.Errorf("bert: corpus %s: byte tokens need a vocabulary of 512 or more, not %d: %w", path, vocab, ErrInput)
	}
	ids = make([]int32, len(data))
	for i, b := range data {
		ids[i] = int32(vocab-256) + int32(b)
	}
	return Corpus{Name: path, IDs: ids}, nil
}

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
func (c Corpus) Batch(r *rand.Rand, m Masking, batch, seq int) (Batch, error) {
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
