package nn

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"unicode/utf8"
)

// ErrCorpus marks a training corpus that is empty, malformed or does not
// fit the vocabulary.
var ErrCorpus = errors.New("bad corpus")

// Corpus is a stream of token ids that training batches are cut from.
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
		return Corpus{}, fmt.Errorf("synthetic corpus of ids [%d, %d), %d tokens: want 0 ≤ first < vocab, n ≥ 0: %w",
			first, vocab, n, ErrCorpus)
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
// onto the last 256 ids of the vocabulary (no tokenizer is needed: the
// model learns the byte stream).
func ReadCorpus(path string, vocab int) (Corpus, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Corpus{}, fmt.Errorf("corpus: %w", err)
	}
	fields := bytes.Fields(data)
	if len(fields) == 0 {
		return Corpus{}, fmt.Errorf("corpus %s is empty: %w", path, ErrCorpus)
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
				return Corpus{}, fmt.Errorf("corpus %s: token %d is id %s, outside the vocabulary [0, %d): %w",
					path, i, fields[i], vocab, ErrCorpus)
			}
		}
		return Corpus{Name: path, IDs: ids}, nil
	}
	if !utf8.Valid(data) {
		return Corpus{}, fmt.Errorf("corpus %s is neither token ids nor UTF-8 text: %w", path, ErrCorpus)
	}
	if vocab < 512 {
		return Corpus{}, fmt.Errorf("corpus %s: byte tokens need a vocabulary of 512 or more, not %d: %w", path, vocab, ErrCorpus)
	}
	ids = make([]int32, len(data))
	for i, b := range data {
		ids[i] = int32(vocab-256) + int32(b)
	}
	return Corpus{Name: path, IDs: ids}, nil
}
