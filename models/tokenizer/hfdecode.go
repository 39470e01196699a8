package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// decodeKind is the type of one of tokenizer.json's decoders.
type decodeKind int

const (
	decReplace decodeKind = iota
	decByteFallback
	decFuse
	decStrip
	decMetaspace
)

// decodeStep is one decoder of the decoder sequence.
type decodeStep struct {
	kind             decodeKind
	pattern, content string    // Replace
	strip            rune      // Strip's content
	start, stop      int       // Strip
	meta             metaspace // Metaspace
}

// token returns the text tokenizers' decode gives id before the decoders
// run, and whether decode keeps it: special added tokens are left out
// (skip_special_tokens), as is any token spelled like one.
func (m *hfModel) token(id int) (string, bool) {
	tok, ok := m.text(id)
	return tok, ok && !m.special[tok]
}

// decode is tokenizers' Tokenizer::decode with skip_special_tokens: the
// tokens of ids, run through the decoders and joined (joined with spaces
// when there is no decoder). Unknown ids are left out.
func (m *hfModel) decode(ids []int) string {
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		if tok, ok := m.token(id); ok {
			tokens = append(tokens, tok)
		}
	}
	if !m.hasDecoder {
		return strings.Join(tokens, " ")
	}
	for _, step := range m.decoders {
		tokens = step.apply(tokens)
	}
	return strings.Join(tokens, "")
}

// apply runs one decoder over the tokens (tokenizers' decode_chain).
func (d decodeStep) apply(tokens []string) []string {
	switch d.kind {
	case decReplace:
		for i, t := range tokens {
			tokens[i] = strings.ReplaceAll(t, d.pattern, d.content)
		}
	case decByteFallback:
		return byteFallback(tokens)
	case decFuse:
		return []string{strings.Join(tokens, "")}
	case decStrip:
		for i, t := range tokens {
			tokens[i] = d.stripToken(t)
		}
	case decMetaspace:
		rep := string(d.meta.replacement)
		for i, t := range tokens {
			if i == 0 && d.meta.scheme != prependNever {
				tokens[i] = strings.ReplaceAll(t, rep, "")
			} else {
				tokens[i] = strings.ReplaceAll(t, rep, " ")
			}
		}
	}
	return tokens
}

// stripToken removes up to start leading and stop trailing d.strip
// characters from t.
func (d decodeStep) stripToken(t string) string {
	rs := []rune(t)
	lo := 0
	for lo < d.start && lo < len(rs) && rs[lo] == d.strip {
		lo++
	}
	hi := len(rs)
	for n := 0; n < d.stop && hi > 0 && rs[hi-1] == d.strip; n++ {
		hi--
	}
	if hi < lo {
		return ""
	}
	return string(rs[lo:hi])
}

// byteFallback is tokenizers' ByteFallback decoder: each run of <0xXX>
// tokens becomes its bytes as one token if they are valid UTF-8, and one
// U+FFFD per byte otherwise.
func byteFallback(tokens []string) []string {
	out := make([]string, 0, len(tokens))
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, t := range tokens {
		if b, ok := byteToken(t); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// byteToken parses a byte token "<0xXX>" as tokenizers' ByteFallback does
// (Rust's u8::from_str_radix on the two characters after "<0x", which
// takes either case and a leading '+').
func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	digits := t[3:5]
	if digits[0] == '+' {
		digits = digits[1:]
	}
	var v byte
	for i := range len(digits) {
		c := digits[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | c
	}
	return v, true
}

// isByte reports whether the decoders read token id as a byte: whether
// the sequence has ByteFallback and id's token is a kept byte token.
func (m *hfModel) isByte(id int) bool {
	if !m.byteDecoding() {
		return false
	}
	tok, ok := m.token(id)
	if !ok {
		return false
	}
	_, b := byteToken(tok)
	return b
}

func (m *hfModel) byteDecoding() bool {
	for _, d := range m.decoders {
		if d.kind == decByteFallback {
			return true
		}
	}
	return false
}

// windowSafe reports whether decoding a window of recent ids, with the
// previous chunk as context, gives what decoding every id gives: true for
// the decoder sequences of SentencePiece-style tokenizers (Replace of one
// character, ByteFallback before Fuse, Strip of at most one leading
// character after Fuse, Metaspace).
func (m *hfModel) windowSafe() bool {
	if !m.hasDecoder {
		return true
	}
	fused := false
	for _, d := range m.decoders {
		switch d.kind {
		case decFuse:
			fused = true
		case decReplace:
			if fused && utf8.RuneCountInString(d.pattern) != 1 {
				return false
			}
		case decByteFallback:
			if fused {
				return false
			}
		case decStrip:
			if fused && (d.start > 1 || d.stop > 0) {
				return false
			}
		}
	}
	return true
}

func (m *hfModel) newDecoder() decoder {
	return &hfStream{m: m, hold: m.byteDecoding()}
}

// hfStream decodes a tokenizer.json tokenizer's ids incrementally, the way
// tokenizers' DecodeStream does: it decodes a window made of the previous
// chunk of ids (the context) and the ids since, and emits what the window's
// text has beyond the context's text. While the last kept token is a byte
// token nothing is emitted, since ByteFallback turns a whole run of bytes
// into U+FFFDs when it ends invalid. Decoder sequences the window cannot
// serve exactly are decoded from the first id at every step.
type hfStream struct {
	m    *hfModel
	hold bool // the decoder has ByteFallback

	ids      []int  // the window: the context, then the new ids
	ctx      int    // how many of ids are the context
	ctxText  string // the text of the context alone
	inBytes  bool   // the last kept token is a byte token
	emitted  int    // bytes emitted so far (full decoding)
	fullText string // the text decoded so far (full decoding)
}

func (s *hfStream) push(id int) string {
	s.ids = append(s.ids, id)
	if _, ok := s.m.token(id); ok {
		s.inBytes = s.hold && s.m.isByte(id)
	}
	if s.inBytes {
		return ""
	}
	return s.emit()
}

// emit returns the text beyond what was emitted, and slides the window.
func (s *hfStream) emit() string {
	text := s.m.decode(s.ids)
	if !s.m.streamWindow {
		if len(text) <= s.emitted || !strings.HasPrefix(text, s.fullText) {
			return ""
		}
		out := text[s.emitted:]
		s.emitted, s.fullText = len(text), text
		return out
	}
	if len(text) <= len(s.ctxText) || !strings.HasPrefix(text, s.ctxText) {
		return ""
	}
	out := text[len(s.ctxText):]
	chunk := s.ids[s.ctx:]
	s.ids = append(s.ids[:0:0], chunk...)
	s.ctx = len(s.ids)
	s.ctxText = s.m.decode(s.ids)
	return out
}

func (s *hfStream) flush() string {
	s.inBytes = false
	out := s.emit()
	*s = hfStream{m: s.m, hold: s.hold}
	return out
}
