package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// hfModel is a tokenizer.json tokenizer: tokenizers' TokenizerImpl with a
// BPE model, restricted to the components SentencePiece-style BPE uses.
type hfModel struct {
	// The BPE model.
	vocab        map[string]int32
	nVocab       int              // entries in vocab, from which added ids count
	tokens       map[int32]string // the model's token of each id
	maxVocabID   int              // the largest id in vocab, -1 if none
	merges       map[uint64]merge
	byteIDs      [256]int32 // ids of <0x00>..<0xFF>, -1 when absent
	unk          int32      // -1 when none
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool

	// Added tokens: by content, by id, and the matchers that find them in
	// raw text (normalized false) and in normalized text (normalized true).
	addedIDs        map[string]int32
	addedTokens     map[int32]*addedToken
	special         map[string]bool // contents of special added tokens
	matchRaw        *matcher
	matchNormalized *matcher

	normalizers   []normStep
	preTokenizers []metaspace
	decoders      []decodeStep
	hasDecoder    bool

	size           int   // one more than the largest id
	prefix, suffix []int // the single template around the text
	bos, eos       int

	// streamWindow tells whether a Stream can decode a window of recent
	// ids (true for the decoder sequences SentencePiece-style tokenizers
	// use) or must decode everything again at each id.
	streamWindow bool
}

// normStep is one normalizer: Prepend or Replace.
type normStep struct {
	prepend          string
	replace          bool
	pattern, content string
}

// prependScheme is Metaspace's prepend_scheme.
type prependScheme int

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

// metaspace is the Metaspace pre-tokenizer or decoder.
type metaspace struct {
	replacement rune
	scheme      prependScheme
	split       bool
}

func (m *hfModel) vocabSize() int { return m.size }

func (m *hfModel) hasID(id int) bool {
	if id < 0 || id >= m.size {
		return false
	}
	if _, ok := m.addedTokens[int32(id)]; ok {
		return true
	}
	_, ok := m.tokens[int32(id)]
	return ok
}

func (m *hfModel) text(id int) (string, bool) {
	if a, ok := m.addedTokens[int32(id)]; ok {
		return a.pattern, true
	}
	t, ok := m.tokens[int32(id)]
	return t, ok
}

func (m *hfModel) id(token string) (int, bool) {
	if id, ok := m.addedIDs[token]; ok {
		return int(id), true
	}
	id, ok := m.vocab[token]
	return int(id), ok
}

func (m *hfModel) specials() (prefix, suffix []int, bos, eos int) {
	return m.prefix, m.suffix, m.bos, m.eos
}

// nstring is a normalized string with, for each of its bytes, the offset
// in the original text it is aligned to (tokenizers' NormalizedString,
// reduced to what Metaspace's prepend_scheme "first" asks: whether a piece
// starts at the original text's first byte).
type nstring struct {
	s    string
	orig []int
}

// normalize runs the normalizers over s, whose first byte is at offset
// start of the original text.
func (m *hfModel) normalize(s string, start int) nstring {
	n := nstring{s: s, orig: make([]int, len(s))}
	for i := range n.orig {
		n.orig[i] = start + i
	}
	for _, step := range m.normalizers {
		if step.replace {
			n = n.replace(step.pattern, step.content)
		} else if n.s != "" {
			n = n.prepend(step.prepend)
		}
	}
	return n
}

// prepend puts p before n, aligned with n's first character.
func (n nstring) prepend(p string) nstring {
	at := 0
	if len(n.orig) > 0 {
		at = n.orig[0]
	}
	orig := make([]int, 0, len(p)+len(n.orig))
	for range len(p) {
		orig = append(orig, at)
	}
	return nstring{s: p + n.s, orig: append(orig, n.orig...)}
}

// replace replaces every occurrence of pattern by content, each aligned
// with the start of what it replaces.
func (n nstring) replace(pattern, content string) nstring {
	if !strings.Contains(n.s, pattern) {
		return n
	}
	var b strings.Builder
	orig := make([]int, 0, len(n.s))
	rest := 0
	for {
		i := strings.Index(n.s[rest:], pattern)
		if i < 0 {
			break
		}
		i += rest
		b.WriteString(n.s[rest:i])
		orig = append(orig, n.orig[rest:i]...)
		b.WriteString(content)
		for range len(content) {
			orig = append(orig, n.orig[i])
		}
		rest = i + len(pattern)
	}
	b.WriteString(n.s[rest:])
	orig = append(orig, n.orig[rest:]...)
	return nstring{s: b.String(), orig: orig}
}

// slice returns the bytes [i, j) of n.
func (n nstring) slice(i, j int) nstring { return nstring{s: n.s[i:j], orig: n.orig[i:j]} }

// encode follows tokenizers' encode_single_sequence: added tokens are cut
// out of the raw text, each remaining piece is normalized and cut at the
// normalized added tokens, pre-tokenized, and each pre-token goes through
// BPE.
func (m *hfModel) encode(text string) []int {
	text = validUTF8(text)
	var ids []int
	m.matchRaw.split(text, func(id int32, start, end int) {
		if id >= 0 {
			ids = append(ids, int(id))
			return
		}
		n := m.normalize(text[start:end], start)
		m.matchNormalized.split(n.s, func(id int32, i, j int) {
			if id >= 0 {
				ids = append(ids, int(id))
				return
			}
			for _, p := range m.preTokenize(n.slice(i, j)) {
				ids = m.bpe(p, ids)
			}
		})
	})
	return ids
}

// preTokenize runs the pre-tokenizers over a normalized piece and returns
// the pre-tokens, empty ones left out.
func (m *hfModel) preTokenize(n nstring) []string {
	pieces := []nstring{n}
	for _, ms := range m.preTokenizers {
		var next []nstring
		for _, p := range pieces {
			next = append(next, ms.preTokenize(p)...)
		}
		pieces = next
	}
	out := make([]string, 0, len(pieces))
	for _, p := range pieces {
		if p.s != "" {
			out = append(out, p.s)
		}
	}
	return out
}

// preTokenize is Metaspace's pre_tokenize on one piece: spaces become the
// replacement, which is prepended unless the piece starts with it (with
// prepend_scheme first, only to a piece at the start of the original
// text), and the piece is split before every replacement when split is set.
func (ms metaspace) preTokenize(n nstring) []nstring {
	if n.s == "" {
		return nil
	}
	rep := string(ms.replacement)
	n = n.replace(" ", rep)
	prepend := false
	switch ms.scheme {
	case prependAlways:
		prepend = !strings.HasPrefix(n.s, rep)
	case prependFirst:
		prepend = !strings.HasPrefix(n.s, rep) && n.orig[0] == 0
	}
	if prepend {
		n = n.prepend(rep)
	}
	if !ms.split {
		return []nstring{n}
	}
	var out []nstring
	start := 0
	for i := 0; i < len(n.s); {
		j := strings.Index(n.s[i:], rep)
		if j < 0 {
			break
		}
		j += i
		if j > start {
			out = append(out, n.slice(start, j))
			start = j
		}
		i = j + len(rep)
	}
	return append(out, n.slice(start, len(n.s)))
}

// validUTF8 replaces each byte of s that is not part of valid UTF-8 with
// U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}
