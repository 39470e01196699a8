package loadgen

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"unicode/utf8"
)

// ErrDataset marks a dataset file or distribution that cannot be used.
var ErrDataset = errors.New("bad dataset")

// An Item is one request of a dataset: its prompt and the output tokens
// to ask for (max_tokens).
type Item struct {
	Prompt       string `json:"prompt"`
	OutputTokens int    `json:"output_tokens"`
}

// maxItemBytes bounds one dataset line.
const maxItemBytes = 16 << 20

// ReadJSONL reads a dataset of one JSON object a line, {"prompt": "…",
// "output_tokens": N}, blank lines skipped; name (the file's) is in its
// errors, with the line.
func ReadJSONL(r io.Reader, name string) ([]Item, error) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), maxItemBytes)
	var items []Item
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" {
			continue
		}
		if !utf8.ValidString(line) {
			return nil, fmt.Errorf("%s:%d: %w: the line is not valid UTF-8", name, n, ErrDataset)
		}
		var it Item
		d := json.NewDecoder(strings.NewReader(line))
		d.DisallowUnknownFields()
		if err := d.Decode(&it); err != nil {
			return nil, fmt.Errorf("%s:%d: %w: %w", name, n, ErrDataset, err)
		}
		if rest := strings.TrimSpace(line[d.InputOffset():]); rest != "" {
			return nil, fmt.Errorf("%s:%d: %w: more than one JSON value on the line, or bytes after it", name, n, ErrDataset)
		}
		if err := it.check(); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		items = append(items, it)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrDataset, err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: %w: no requests", name, ErrDataset)
	}
	return items, nil
}

// maxOutputTokens bounds an item's output_tokens.
const maxOutputTokens = 1 << 20

func (it Item) check() error {
	switch {
	case it.Prompt == "":
		return fmt.Errorf("%w: empty \"prompt\"", ErrDataset)
	case !utf8.ValidString(it.Prompt):
		return fmt.Errorf("%w: \"prompt\" is not valid UTF-8", ErrDataset)
	case it.OutputTokens < 1 || it.OutputTokens > maxOutputTokens:
		return fmt.Errorf("%w: \"output_tokens\" %d outside [1, %d]", ErrDataset, it.OutputTokens, maxOutputTokens)
	}
	return nil
}

// A Range is a closed range of integers [Min, Max] drawn uniformly.
type Range struct{ Min, Max int }

// ParseRange parses "N" or "MIN:MAX".
func ParseRange(s string) (Range, error) {
	lo, hi, found := strings.Cut(s, ":")
	var r Range
	if _, err := fmt.Sscan(lo, &r.Min); err != nil {
		return Range{}, fmt.Errorf("%w: range %q: %w", ErrDataset, s, err)
	}
	r.Max = r.Min
	if found {
		if _, err := fmt.Sscan(hi, &r.Max); err != nil {
			return Range{}, fmt.Errorf("%w: range %q: %w", ErrDataset, s, err)
		}
	}
	if r.Min < 1 || r.Max < r.Min {
		return Range{}, fmt.Errorf("%w: range %q: want 1 ≤ MIN ≤ MAX", ErrDataset, s)
	}
	return r, nil
}

func (r Range) String() string {
	if r.Min == r.Max {
		return fmt.Sprint(r.Min)
	}
	return fmt.Sprintf("%d:%d", r.Min, r.Max)
}

func (r Range) draw(rng *rand.Rand) int { return r.Min + rng.IntN(r.Max-r.Min+1) }

// syllables make the words of synthetic prompts: common English
// syllables, so that a subword tokenizer splits a word into one to three
// tokens.
var syllables = []string{"an", "ber", "con", "de", "el", "for", "gen", "in", "ka", "lo", "men", "no", "or",
	"pro", "re", "sa", "ter", "un", "ver", "with", "a", "be", "com", "di", "ex", "fi", "ha", "im", "la", "ma"}

// Synthetic returns n requests, seeded: prompts of words (one to three
// syllables each) numbering a draw from words, and output tokens a draw
// from output.
func Synthetic(n int, words, output Range, seed uint64) []Item {
	rng := rand.New(rand.NewPCG(seed, 0x6c6f6164))
	items := make([]Item, n)
	for i := range items {
		var b strings.Builder
		for w := range words.draw(rng) {
			if w > 0 {
				b.WriteByte(' ')
			}
			for range 1 + rng.IntN(3) {
				b.WriteString(syllables[rng.IntN(len(syllables))])
			}
		}
		items[i] = Item{Prompt: b.String(), OutputTokens: output.draw(rng)}
	}
	return items
}
