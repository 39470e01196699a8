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
			File   string `json:"file"`
			SHA256 string `json:"sha256"`
			Cases  []struct {
				Name    string `json:"name"`
				Text    string `json:"text"`
				IDs     []int  `json:"ids"`
				Plain   []int  `json:"plain"`
				Decoded string `json:"decoded"`
			} `json:"cases"`
			Decodes []struct {
				IDs  []int  `json:"ids"`
				Text string `json:"text"`
			} `json:"decodes"`
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
			for _, c := range v.Cases {
				assert.Equal(t, c.IDs, nonNil(tok.Encode(c.Text, true)), "Encode(%s, true)", c.Name)
				assert.Equal(t, c.Plain, nonNil(tok.Encode(c.Text, false)), "Encode(%s, false)", c.Name)
				got, err := tok.Decode(c.IDs)
				require.NoError(t, err)
				assert.Equal(t, c.Decoded, got, "Decode(Encode(%s))", c.Name)
				assert.Equal(t, c.Decoded, streamed(tok, c.IDs), "Stream of %s", c.Name)
			}
			for _, d := range v.Decodes {
				got, err := tok.Decode(d.IDs)
				require.NoError(t, err)
				assert.Equal(t, d.Text, got, "Decode(%v)", d.IDs)
				assert.Equal(t, d.Text, streamed(tok, d.IDs), "Stream of %v", d.IDs)
			}
		})
	}
}
