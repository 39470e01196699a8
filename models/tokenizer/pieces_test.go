package tokenizer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/tokenizer"
)

// TestPiecesLlama2 lists Llama 2's tokenizer.json as SentencePiece pieces
// (the vocabulary a GGUF file embeds) and checks that the SentencePiece
// tokenizer built from them encodes the reference cases as Hugging Face's
// tokenizers encodes the tokenizer.json in its legacy layout (the one that
// reproduces SentencePiece): the derived scores merge in the merges list's
// order. Texts holding special tokens are left out: tokenizers splits them
// out of the text, SentencePiece encodes them as text. The metaspace
// layout (transformers' legacy=false) pre-tokenizes differently from
// SentencePiece, so a piece list cannot reproduce it.
func TestPiecesLlama2(t *testing.T) {
	dir := llama2Dir(t)
	data, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	require.NoError(t, err)
	var exp refExpected
	require.NoError(t, json.Unmarshal(data, &exp))
	for name, layout := range exp.Layouts {
		if name != "legacy" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			hf, err := tokenizer.Load(filepath.Join(dir, layout.File))
			require.NoError(t, err)
			p, err := hf.Pieces()
			require.NoError(t, err)
			require.Len(t, p.Tokens, 32000)
			assert.Equal(t, []int32{tokenizer.PieceUnknown, tokenizer.PieceControl, tokenizer.PieceControl, tokenizer.PieceByte}, p.Types[:4])
			// "▁▁" (259) merges last, "▁t" (260) first.
			assert.Equal(t, []float32{-61248, 0}, p.Scores[259:261])
			sp, err := tokenizer.FromPieces("llama2 pieces", p)
			require.NoError(t, err)
			n := 0
			for _, c := range layout.Cases {
				if strings.Contains(c.Text, "<s>") || strings.Contains(c.Text, "</s>") || strings.Contains(c.Text, "<unk>") {
					continue
				}
				assert.Equal(t, c.IDs, nonNil(sp.Encode(c.Text, true)), "Encode(%s, true)", c.Name)
				n++
			}
			assert.Greater(t, n, 30, "cases compared")
		})
	}
}

// TestFromPiecesErrors: a malformed piece list is refused naming what is
// wrong.
func TestFromPiecesErrors(t *testing.T) {
	good := func() tokenizer.Pieces {
		return tokenizer.Pieces{
			Tokens: []string{"<unk>", "<s>", "</s>", "a"}, Scores: []float32{0, 0, 0, -1},
			Types: []int32{2, 3, 3, 1}, BOS: 1, EOS: 2, AddBOS: true,
		}
	}
	tests := []struct {
		name string
		edit func(p *tokenizer.Pieces)
		want string
	}{
		{"no tokens", func(p *tokenizer.Pieces) { *p = tokenizer.Pieces{} }, "no tokens"},
		{"scores", func(p *tokenizer.Pieces) { p.Scores = p.Scores[:3] }, "3 scores for 4 tokens"},
		{"types", func(p *tokenizer.Pieces) { p.Types = nil }, "0 token types for 4 tokens"},
		{"type", func(p *tokenizer.Pieces) { p.Types[3] = 9 }, `token 3 "a": type 9 is not a piece type`},
		{"empty token", func(p *tokenizer.Pieces) { p.Tokens[3] = "" }, "token 3 is empty"},
		{"duplicate", func(p *tokenizer.Pieces) { p.Tokens[3] = "<s>"; p.Types[3] = 3 }, `"<s>" is already defined`},
		{"no unknown", func(p *tokenizer.Pieces) { p.Types[0] = 1 }, "no UNKNOWN piece"},
		{"bos out of range", func(p *tokenizer.Pieces) { p.BOS = 4 }, "BOS id 4 is not a token"},
		{"add bos without one", func(p *tokenizer.Pieces) { p.BOS = -1 }, "add BOS is set but there is no such token"},
		{"byte piece", func(p *tokenizer.Pieces) { p.Tokens[3] = "<0x41>"; p.Types[3] = 6 }, "byte_fallback is set but there is no byte piece <0x00>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := good()
			tc.edit(&p)
			tok, err := tokenizer.FromPieces("x.gguf", p)
			require.Error(t, err)
			assert.Nil(t, tok)
			assert.ErrorIs(t, err, tokenizer.ErrInvalid)
			assert.Contains(t, err.Error(), "x.gguf")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	tok, err := tokenizer.FromPieces("x.gguf", good())
	require.NoError(t, err)
	assert.Equal(t, []int{1, 0, 3}, tok.Encode("a", true)) // the dummy prefix "▁" is not a piece: unknown
	assert.Equal(t, "x.gguf", tok.Path())
}
