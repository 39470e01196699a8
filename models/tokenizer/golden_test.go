package tokenizer_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/tokenizer"
)

// tinyDir holds the tiny Llama checkpoint's tokenizer files, written by
// testdata/reference/tokenizer.py.
var tinyDir = filepath.Join("..", "..", "testdata", "golden", "llama-tiny")

// tinyGolden is testdata/golden/tokenizer-tiny.json.
type tinyGolden struct {
	Reference map[string]string `json:"reference"`
	Files     map[string]string `json:"files"`
	Cases     []struct {
		Name string   `json:"name"`
		Text string   `json:"text"`
		SPM  expected `json:"spm"`
		HF   expected `json:"hf"`
	} `json:"cases"`
	Decodes []struct {
		IDs []int  `json:"ids"`
		SPM string `json:"spm"`
		HF  string `json:"hf"`
	} `json:"decodes"`
}

type expected struct {
	IDs     []int  `json:"ids"`
	Plain   []int  `json:"plain"`
	Decoded string `json:"decoded"`
}

func readTinyGolden(t *testing.T) tinyGolden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "golden", "tokenizer-tiny.json"))
	require.NoError(t, err)
	var g tinyGolden
	require.NoError(t, json.Unmarshal(data, &g))
	require.NotEmpty(t, g.Cases)
	// The expectations must be those of the files beside them.
	for name, sum := range g.Files {
		data, err := os.ReadFile(filepath.Join(tinyDir, name))
		require.NoError(t, err)
		got := sha256.Sum256(data)
		require.Equal(t, sum, hex.EncodeToString(got[:]), "%s changed since testdata/reference/tokenizer.py wrote the golden file: run it again", name)
	}
	return g
}

// TestTinyGolden compares the tiny checkpoint's tokenizer.model with
// SentencePiece and its tokenizer.json with Hugging Face's tokenizers, token
// for token and character for character.
func TestTinyGolden(t *testing.T) {
	g := readTinyGolden(t)
	t.Logf("references: %v", g.Reference)
	tests := []struct {
		name string
		path string
		pick func(spm, hf expected) expected
		text func(spm, hf string) string
	}{
		{"tokenizer.model", filepath.Join(tinyDir, "tokenizer.model"),
			func(spm, _ expected) expected { return spm }, func(spm, _ string) string { return spm }},
		{"tokenizer.json", filepath.Join(tinyDir, "tokenizer.json"),
			func(_, hf expected) expected { return hf }, func(_, hf string) string { return hf }},
		{"dir", tinyDir,
			func(_, hf expected) expected { return hf }, func(_, hf string) string { return hf }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := tokenizer.Load(tt.path)
			require.NoError(t, err)
			assert.Equal(t, 512, tok.VocabSize())
			assert.Equal(t, 1, tok.BOS())
			assert.Equal(t, 2, tok.EOS())
			var layout refLayout
			for _, c := range g.Cases {
				want := tt.pick(c.SPM, c.HF)
				layout.Cases = append(layout.Cases, refCase{c.Name, c.Text, want.IDs, want.Plain, want.Decoded})
			}
			for _, d := range g.Decodes {
				layout.Decodes = append(layout.Decodes, refDecode{d.IDs, tt.text(d.SPM, d.HF)})
			}
			checkReference(t, tok, layout)
		})
	}
}
