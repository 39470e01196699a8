package tokenizer

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is one of tokenizer.json's added_tokens.
type addedToken struct {
	content    string
	pattern    string // content, normalized when normalized is set
	singleWord bool
	lstrip     bool
	rstrip     bool
	normalized bool
	special    bool
}

// matcher finds added tokens in text as tokenizers' AddedVocabulary does:
// leftmost-longest, non-overlapping matches.
type matcher struct {
	// byFirst holds, for each first byte, the tokens starting with it,
	// longest first.
	byFirst map[byte][]matchToken
}

type matchToken struct {
	id int32
	t  *addedToken
}

// newMatcher returns the matcher of the added tokens whose normalized flag
// is normalized, or nil if there are none.
func newMatcher(tokens map[int32]*addedToken, normalized bool) *matcher {
	m := &matcher{byFirst: map[byte][]matchToken{}}
	for id, t := range tokens {
		if t.normalized != normalized || t.pattern == "" {
			continue
		}
		m.byFirst[t.pattern[0]] = append(m.byFirst[t.pattern[0]], matchToken{id, t})
	}
	if len(m.byFirst) == 0 {
		return nil
	}
	for _, ts := range m.byFirst {
		slices.SortFunc(ts, func(a, b matchToken) int {
			if d := len(b.t.pattern) - len(a.t.pattern); d != 0 {
				return d
			}
			return strings.Compare(a.t.pattern, b.t.pattern)
		})
	}
	return m
}

// find returns the leftmost-longest match in s at or after from, and its
// end, or a nil token.
func (m *matcher) find(s string, from int) (*matchToken, int) {
	for i := from; i < len(s); i++ {
		for k, t := range m.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], t.t.pattern) {
				return &m.byFirst[s[i]][k], i
			}
		}
	}
	return nil, 0
}

// split cuts s into the added tokens found in it and the text between
// them, calling fn with each in order: the token's id and its span, or -1
// and the span of non-empty text between tokens. Tokens marked
// single_word match only between non-word characters; lstrip and rstrip
// take the whitespace to their left and right into the token. A nil
// matcher finds nothing.
func (m *matcher) split(s string, fn func(id int32, start, end int)) {
	if m == nil {
		if s != "" {
			fn(-1, 0, len(s))
		}
		return
	}
	offset, from := 0, 0
	for {
		t, at := m.find(s, from)
		if t == nil {
			break
		}
		start, stop := at, at+len(t.t.pattern)
		from = stop
		if t.t.singleWord {
			startOK := start == 0 || !endsWithWord(s[:start])
			stopOK := stop == len(s) || !startsWithWord(s[stop:])
			if !startOK || !stopOK {
				continue
			}
		}
		if t.t.lstrip {
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), offset)
		}
		if t.t.rstrip {
			stop += len(s[stop:]) - len(strings.TrimLeftFunc(s[stop:], unicode.IsSpace))
		}
		if offset < start {
			fn(-1, offset, start)
		}
		fn(t.id, start, stop)
		offset = stop
	}
	if offset < len(s) {
		fn(-1, offset, len(s))
	}
}

// isWord reports whether r is a word character of Rust's regex \w:
// Alphabetic, a mark, a decimal digit, a connector punctuation or a join
// control.
func isWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) ||
		unicode.In(r, unicode.Nl, unicode.Other_Alphabetic, unicode.Nd, unicode.Pc, unicode.Join_Control)
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWord(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWord(r)
}
