package tokenizer_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/tokenizer"
)

// TestVariants compares the tokenizer variants of
// testdata/golden/tokenizer-variants (user-defined and UNUSED pieces, no
// byte fallback, no dummy prefix; Metaspace in every form, added tokens with
// their flags, ignore_merges, no decoder, an EOS template) with SentencePiece
// or tokenizers, as testdata/reference/tokenizer.py recorded them.
func TestVariants(t *testing.T) {
	golden := filepath.Join("..", "..", "testdata", "golden")
	data, err := os.ReadFile(filepath.Join(golden, "tokenizer-variants.json"))
	require.NoError(t, err)
	var g struct {
		Variants []struct {
			Name   string `json:"name"`
			SHA256 string `json:"sha256"`
			refLayout
		} `json:"variants"`
	}
	require.NoError(t, json.Unmarshal(data, &g))
	require.NotEmpty(t, g.Variants)
	for _, v := range g.Variants {
		t.Run(v.Name, func(t *testing.T) {
			path := filepath.Join(golden, "tokenizer-variants", v.File)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			sum := sha256.Sum256(data)
			require.Equal(t, v.SHA256, hex.EncodeToString(sum[:]), "%s changed since testdata/reference/tokenizer.py wrote the golden file", v.File)
			tok, err := tokenizer.Load(path)
			require.NoError(t, err)
			checkReference(t, tok, v.refLayout)
		})
	}
}
