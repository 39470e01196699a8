package tokenizer

import (
	"container/heap"
	"slices"
	"strings"
	"unicode/utf8"
)

// spaceSymbol is SentencePiece's escaped space, U+2581.
const spaceSymbol = "\u2581"

// spModel is a SentencePiece BPE model: the pieces of a tokenizer.model
// and SentencePiece's encoding and decoding over them.
type spModel struct {
	pieces []spPiece
	// normal maps NORMAL, USER_DEFINED and UNUSED pieces to their ids,
	// reserved the others (CONTROL, UNKNOWN, BYTE), as ModelInterface's
	// pieces_ and reserved_id_map_.
	normal, reserved map[string]int32
	userDefined      []string // longest first, once built
	unk              int32
	byteFallback     bool
	byteIDs          [256]int32

	addDummyPrefix   bool
	removeExtraSpace bool
	escapeSpace      bool
	unkSurface       string
	bos, eos         int
}

func (m *spModel) vocabSize() int { return len(m.pieces) }

func (m *spModel) hasID(id int) bool { return id >= 0 && id < len(m.pieces) }

func (m *spModel) text(id int) (string, bool) {
	if !m.hasID(id) {
		return "", false
	}
	return m.pieces[id].piece, true
}

func (m *spModel) id(token string) (int, bool) {
	if id, ok := m.reserved[token]; ok {
		return int(id), true
	}
	id, ok := m.normal[token]
	return int(id), ok
}

// pieceID is SentencePiece's PieceToId: a reserved piece, else a normal
// one, else unk.
func (m *spModel) pieceID(piece string) int32 {
	if id, ok := m.reserved[piece]; ok {
		return id
	}
	if id, ok := m.normal[piece]; ok {
		return id
	}
	return m.unk
}

// specials: Llama's tokenizer (transformers' LlamaTokenizer over this
// model) adds BOS and not EOS.
func (m *spModel) specials() (prefix, suffix []int, bos, eos int) {
	if m.bos >= 0 {
		prefix = []int{m.bos}
	}
	return prefix, nil, m.bos, m.eos
}

func (m *spModel) buildPrefixMatcher() {
	slices.SortFunc(m.userDefined, func(a, b string) int {
		if d := len(b) - len(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
}

// matchUserDefined returns the length of the longest user-defined piece s
// starts with, or 0.
func (m *spModel) matchUserDefined(s string) int {
	for _, u := range m.userDefined {
		if strings.HasPrefix(s, u) {
			return len(u)
		}
	}
	return 0
}

// normalize is SentencePiece's Normalizer::Normalize with no character
// map: malformed UTF-8 becomes U+FFFD a byte at a time, with
// remove_extra_whitespaces leading, trailing and repeated spaces go, with
// escape_whitespaces spaces become U+2581, and with add_dummy_prefix one is
// put in front of a non-empty text. User-defined pieces pass unchanged.
func (m *spModel) normalize(text string) string {
	if m.removeExtraSpace {
		text = strings.TrimLeft(text, " ")
	}
	if text == "" {
		return ""
	}
	space := " "
	if m.escapeSpace {
		space = spaceSymbol
	}
	var b strings.Builder
	b.Grow(len(text) + len(text)/2 + 3)
	if m.addDummyPrefix {
		b.WriteString(space)
	}
	prevSpace := m.removeExtraSpace
	for len(text) > 0 {
		var piece string
		if n := m.matchUserDefined(text); n > 0 {
			piece, text = text[:n], text[n:]
		} else if r, n := utf8.DecodeRuneInString(text); r == utf8.RuneError && n == 1 {
			piece, text = "\uFFFD", text[1:]
		} else {
			piece, text = text[:n], text[n:]
		}
		if prevSpace {
			piece = strings.TrimLeft(piece, " ")
		}
		if piece == "" {
			continue
		}
		if m.escapeSpace {
			b.WriteString(strings.ReplaceAll(piece, " ", spaceSymbol))
		} else {
			b.WriteString(piece)
		}
		prevSpace = m.removeExtraSpace && strings.HasSuffix(piece, " ")
	}
	out := b.String()
	if m.removeExtraSpace {
		for strings.HasSuffix(out, space) {
			out = out[:len(out)-len(space)]
		}
	}
	return out
}

// spSymbol is one symbol of the text being merged: a slice of it, in a
// list linked by index; a symbol merged into its left neighbour is empty.
type spSymbol struct {
	start, end int32
	prev, next int32
	freeze     bool // a user-defined piece, never merged
}

// spPair is a candidate merge of the symbols left and right into a piece
// of the given score and byte length.
type spPair struct {
	left, right int32
	score       float32
	size        int32
}

// spAgenda orders candidate merges by score, highest first, then by
// position: the order of SentencePiece's bpe::Model.
type spAgenda []spPair

func (a spAgenda) Len() int { return len(a) }
func (a spAgenda) Less(i, j int) bool {
	if a[i].score != a[j].score {
		return a[i].score > a[j].score
	}
	return a[i].left < a[j].left
}
func (a spAgenda) Swap(i, j int) { a[i], a[j] = a[j], a[i] }
func (a *spAgenda) Push(x any)   { *a = append(*a, x.(spPair)) }
func (a *spAgenda) Pop() any {
	old := *a
	x := old[len(old)-1]
	*a = old[:len(old)-1]
	return x
}

// encode is SentencePieceProcessor::Encode over a BPE model: the text is
// normalized and split into characters (user-defined pieces whole), the
// adjacent pair whose concatenation is the highest-scoring piece merges
// first, UNUSED pieces are split back into the pieces they were made of,
// and a piece out of the vocabulary becomes its bytes' pieces with byte
// fallback, else unk (consecutive unknowns as one).
func (m *spModel) encode(text string) []int {
	s := m.normalize(text)
	if s == "" {
		return nil
	}
	syms := make([]spSymbol, 0, len(s))
	for i := 0; i < len(s); {
		n, freeze := m.matchUserDefined(s[i:]), true
		if n == 0 {
			_, n = utf8.DecodeRuneInString(s[i:])
			freeze = false
		}
		k := int32(len(syms))
		syms = append(syms, spSymbol{start: int32(i), end: int32(i + n), prev: k - 1, next: k + 1, freeze: freeze})
		i += n
	}
	syms[len(syms)-1].next = -1

	// revMerge records, for a merged UNUSED piece, the two pieces it
	// was made of.
	var revMerge map[string][2]string
	agenda := make(spAgenda, 0, len(syms))
	maybeAdd := func(left, right int32, push bool) {
		if left < 0 || right < 0 || syms[left].freeze || syms[right].freeze {
			return
		}
		l, r := syms[left], syms[right]
		piece := s[l.start:r.end]
		id, ok := m.normal[piece]
		if !ok {
			return
		}
		p := spPair{left: left, right: right, score: m.pieces[id].score, size: r.end - l.start}
		if push {
			heap.Push(&agenda, p)
		} else {
			agenda = append(agenda, p)
		}
		if m.pieces[id].typ == pieceUnused {
			if revMerge == nil {
				revMerge = map[string][2]string{}
			}
			revMerge[piece] = [2]string{s[l.start:l.end], s[r.start:r.end]}
		}
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		maybeAdd(i-1, i, false)
	}
	heap.Init(&agenda)
	for agenda.Len() > 0 {
		top := heap.Pop(&agenda).(spPair)
		l, r := &syms[top.left], &syms[top.right]
		if l.start == l.end || r.start == r.end || (l.end-l.start)+(r.end-r.start) != top.size {
			continue
		}
		l.end = r.end
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = top.left
		}
		r.start, r.end = 0, 0
		maybeAdd(l.prev, top.left, true)
		maybeAdd(top.left, l.next, true)
	}

	var ids []int
	prevUnk := false
	var emit func(piece string)
	emit = func(piece string) {
		id := m.pieceID(piece)
		if m.pieces[id].typ == pieceUnused {
			if parts, ok := revMerge[piece]; ok {
				emit(parts[0])
				emit(parts[1])
				return
			}
		}
		isUnk := id == m.unk
		switch {
		case isUnk && m.byteFallback:
			for i := range len(piece) {
				ids = append(ids, int(m.byteIDs[piece[i]]))
			}
		case isUnk && prevUnk:
			// Merged into the previous unknown piece.
		default:
			ids = append(ids, int(id))
		}
		prevUnk = isUnk
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		emit(s[syms[i].start:syms[i].end])
	}
	return ids
}

func (m *spModel) newDecoder() decoder { return &spDecoder{m: m, bosSpace: true} }

// spDecoder is SentencePieceProcessor::Decode, incremental: a run of byte
// pieces turns into UTF-8 characters (U+FFFD for each byte that starts no
// valid character), CONTROL pieces into nothing, the UNKNOWN piece into
// unk_surface, and other pieces into their text with U+2581 as a space;
// the leading space of the first piece with text, the one the dummy prefix
// put there, is dropped.
type spDecoder struct {
	m        *spModel
	bytes    []byte // the byte pieces of the current run not yet emitted
	started  bool   // some text was emitted
	bosSpace bool   // the leading space may still be dropped
	bosSeen  bool   // the last piece dropped its leading space
}

func (d *spDecoder) push(id int) string {
	m := d.m
	if id < 0 || id >= len(m.pieces) {
		return ""
	}
	p := m.pieces[id]
	if p.typ == pieceByte {
		b, _ := spByte(p.piece)
		d.bytes = append(d.bytes, b)
		return d.takeBytes(false)
	}
	out := d.takeBytes(true)
	if d.bosSeen || d.started {
		d.bosSpace = false
	}
	var text string
	d.bosSeen = false
	switch p.typ {
	case pieceControl:
	case pieceUnknown:
		text = m.unkSurface
	default:
		piece := p.piece
		if d.bosSpace && (m.addDummyPrefix || m.removeExtraSpace) {
			var cut bool
			piece, cut = strings.CutPrefix(piece, spaceSymbol)
			d.bosSeen = cut && !m.removeExtraSpace
		}
		text = strings.ReplaceAll(piece, spaceSymbol, " ")
	}
	out += text
	if out != "" {
		d.started = true
	}
	return out
}

// takeBytes returns the characters the pending bytes complete; at the end
// of a run (end), bytes left over are each U+FFFD.
func (d *spDecoder) takeBytes(end bool) string {
	var b strings.Builder
	for len(d.bytes) > 0 {
		if !end && !utf8.FullRune(d.bytes) {
			break
		}
		r, n := utf8.DecodeRune(d.bytes)
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.Write(d.bytes[:n])
		}
		d.bytes = d.bytes[n:]
	}
	if len(d.bytes) == 0 {
		d.bytes = d.bytes[:0:0]
	}
	if b.Len() > 0 {
		d.started = true
	}
	return b.String()
}

func (d *spDecoder) flush() string {
	out := d.takeBytes(true)
	*d = spDecoder{m: d.m, bosSpace: true}
	return out
}
