package tokenizer

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// Pieces is a SentencePiece BPE vocabulary listed piece by piece: the form
// in which GGUF files embed Llama's tokenizer (tokenizer.ggml.tokens,
// scores and token_type, with the special ids and add flags).
type Pieces struct {
	Tokens []string
	// Scores order merges: SentencePiece merges the adjacent pair whose
	// merged piece scores highest.
	Scores []float32
	// Types are SentencePiece's piece types, which GGUF's token_type uses
	// too: PieceNormal … PieceByte.
	Types []int32
	// BOS and EOS are the ids of the special tokens, -1 when none.
	BOS, EOS int
	// AddBOS and AddEOS tell whether Encode adds them.
	AddBOS, AddEOS bool
	// ChatTemplate is the Jinja source of the chat template (GGUF's
	// tokenizer.chat_template), "" when none.
	ChatTemplate string
}

// Piece types.
const (
	PieceNormal      = int32(pieceNormal)
	PieceUnknown     = int32(pieceUnknown)
	PieceControl     = int32(pieceControl)
	PieceUserDefined = int32(pieceUserDefined)
	PieceUnused      = int32(pieceUnused)
	PieceByte        = int32(pieceByte)
)

// FromPieces returns the SentencePiece BPE tokenizer of p with Llama's
// normalizer settings (the identity rule, a dummy "▁" prefix, spaces
// escaped to "▁", extra whitespace kept), byte fallback when p has byte
// pieces. name is used in messages and returned by Path.
func FromPieces(name string, p Pieces) (*Tokenizer, error) {
	t, err := fromPieces(p)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", name, err)
	}
	t.path = name
	t.chatTemplate = p.ChatTemplate
	return t, nil
}

func fromPieces(p Pieces) (*Tokenizer, error) {
	n := len(p.Tokens)
	switch {
	case n == 0:
		return nil, fmt.Errorf("no tokens: %w", ErrInvalid)
	case n > maxPieces:
		return nil, fmt.Errorf("%d tokens, more than %d: %w", n, maxPieces, ErrInvalid)
	case len(p.Scores) != n:
		return nil, fmt.Errorf("%d scores for %d tokens: %w", len(p.Scores), n, ErrInvalid)
	case len(p.Types) != n:
		return nil, fmt.Errorf("%d token types for %d tokens: %w", len(p.Types), n, ErrInvalid)
	}
	proto := spProto{
		pieces:         make([]spPiece, n),
		modelType:      modelTypeBPE,
		unkSurface:     " \u2047 ",
		addDummyPrefix: true,
		escapeSpace:    true,
	}
	for i, tok := range p.Tokens {
		typ := pieceType(p.Types[i])
		switch {
		case pieceTypeNames[typ] == "":
			return nil, fmt.Errorf("token %d %q: type %d is not a piece type: %w", i, tok, p.Types[i], ErrInvalid)
		case tok == "":
			return nil, fmt.Errorf("token %d is empty: %w", i, ErrInvalid)
		case !utf8.ValidString(tok):
			return nil, fmt.Errorf("token %d %q is not valid UTF-8: %w", i, tok, ErrInvalid)
		case math.IsNaN(float64(p.Scores[i])):
			return nil, fmt.Errorf("token %d %q: score is NaN: %w", i, tok, ErrInvalid)
		}
		if typ == pieceByte {
			proto.byteFallback = true
		}
		proto.pieces[i] = spPiece{piece: tok, score: p.Scores[i], typ: typ}
	}
	special := func(field string, id int) (string, error) {
		if id < -1 || id >= n {
			return "", fmt.Errorf("%s id %d is not a token (%d tokens): %w", field, id, n, ErrInvalid)
		}
		if id < 0 {
			return "", nil
		}
		return p.Tokens[id], nil
	}
	var err error
	if proto.bosPiece, err = special("BOS", p.BOS); err != nil {
		return nil, err
	}
	if proto.eosPiece, err = special("EOS", p.EOS); err != nil {
		return nil, err
	}
	m, err := newSPModel(&proto)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{m: m, bos: p.BOS, eos: p.EOS}
	add := func(field string, on bool, id int) ([]int, error) {
		switch {
		case !on:
			return nil, nil
		case id < 0:
			return nil, fmt.Errorf("%s is set but there is no such token: %w", field, ErrInvalid)
		}
		return []int{id}, nil
	}
	if t.prefix, err = add("add BOS", p.AddBOS, p.BOS); err != nil {
		return nil, err
	}
	if t.suffix, err = add("add EOS", p.AddEOS, p.EOS); err != nil {
		return nil, err
	}
	return t, nil
}

// Pieces lists the tokenizer's vocabulary piece by piece, for writing it
// into a GGUF file. A tokenizer.model gives its pieces as they are. A
// tokenizer.json (byte-fallback BPE, Llama 2's kind) has no scores; they
// are made so that SentencePiece, merging the highest-scoring piece first,
// merges in the merges list's order: when the list merges pieces in the
// order of their ids, as SentencePiece's trainer numbers them, normal
// token i gets the trainer's own score −(i − the first normal id);
// otherwise (Llama 2, whose whitespace-run pieces merge last) a token gets
// −(the rank of the first merge making it), and tokens no merge makes
// score below all of those. Its unknown token is UNKNOWN, special added
// tokens CONTROL, other added tokens USER_DEFINED and <0xNN> tokens BYTE.
func (t *Tokenizer) Pieces() (Pieces, error) {
	p := Pieces{BOS: t.bos, EOS: t.eos, ChatTemplate: t.chatTemplate}
	p.AddBOS = len(t.prefix) == 1 && t.prefix[0] == t.bos
	p.AddEOS = len(t.suffix) == 1 && t.suffix[0] == t.eos
	if len(t.prefix) > 0 && !p.AddBOS || len(t.suffix) > 0 && !p.AddEOS {
		return Pieces{}, fmt.Errorf("tokenizer: %s: adds special tokens other than one BOS before and one EOS after the text, which a piece list cannot say: %w", t.path, ErrUnsupported)
	}
	switch m := t.m.(type) {
	case *spModel:
		for _, sp := range m.pieces {
			p.Tokens = append(p.Tokens, sp.piece)
			p.Scores = append(p.Scores, sp.score)
			p.Types = append(p.Types, int32(sp.typ))
		}
		return p, nil
	case *hfModel:
		return m.pieces(t.path, p)
	}
	return Pieces{}, fmt.Errorf("tokenizer: %s: cannot list its pieces: %w", t.path, ErrUnsupported)
}

// pieces fills p with the tokens of a tokenizer.json (see Tokenizer.Pieces).
func (m *hfModel) pieces(name string, p Pieces) (Pieces, error) {
	if m.ignoreMerges {
		return Pieces{}, fmt.Errorf("tokenizer: %s: ignore_merges has no SentencePiece equivalent: %w", name, ErrUnsupported)
	}
	// rank is the rank of the first merge making each token.
	rank := map[int32]int32{}
	for _, mg := range m.merges {
		if r, ok := rank[mg.id]; !ok || mg.rank < r {
			rank[mg.id] = mg.rank
		}
	}
	first, byID := -1, true
	last := int32(-1)
	for id := range m.size {
		tok, typ := m.tokenAndType(int32(id))
		if tok == "" {
			return Pieces{}, fmt.Errorf("tokenizer: %s: id %d has no token, which a piece list cannot skip: %w", name, id, ErrUnsupported)
		}
		if typ == pieceNormal && first < 0 {
			first = id
		}
		if r, ok := rank[int32(id)]; ok && typ == pieceNormal {
			byID = byID && r > last
			last = r
		}
		p.Tokens = append(p.Tokens, tok)
		p.Types = append(p.Types, int32(typ))
	}
	p.Scores = make([]float32, len(p.Tokens))
	for id, typ := range p.Types {
		r, merged := rank[int32(id)]
		switch {
		case typ != int32(pieceNormal):
		case byID:
			p.Scores[id] = -float32(id - first)
		case merged:
			p.Scores[id] = -float32(r)
		default:
			p.Scores[id] = -float32(len(m.merges) + id - first)
		}
	}
	return p, nil
}

// tokenAndType is the token of id and its SentencePiece piece type.
func (m *hfModel) tokenAndType(id int32) (string, pieceType) {
	if a, ok := m.addedTokens[id]; ok {
		switch {
		case id == m.unk:
			return a.content, pieceUnknown
		case a.special:
			return a.content, pieceControl
		}
		if _, inVocab := m.tokens[id]; !inVocab {
			return a.content, pieceUserDefined
		}
	}
	tok, ok := m.tokens[id]
	switch {
	case !ok:
		return "", 0
	case id == m.unk:
		return tok, pieceUnknown
	}
	if _, isByte := spByte(tok); isByte && m.byteFallback {
		return tok, pieceByte
	}
	return tok, pieceNormal
}
