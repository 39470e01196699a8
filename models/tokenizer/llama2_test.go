package tokenizer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/tokenizer"
)

// refExpected is .cache/tokenizer-ref/llama2/expected.json, written by
// testdata/reference/tokenizer.mjs --llama2.
type refExpected struct {
	Reference string               `json:"reference"`
	Layouts   map[string]refLayout `json:"layouts"`
}

// refLayout is one tokenizer file's expected results.
type refLayout struct {
	File    string      `json:"file"`
	Cases   []refCase   `json:"cases"`
	Decodes []refDecode `json:"decodes"`
}

// refCase is a text's ids with and without the special tokens, and the
// text the ids decode to.
type refCase struct {
	Name    string `json:"name"`
	Text    string `json:"text"`
	IDs     []int  `json:"ids"`
	Plain   []int  `json:"plain"`
	Decoded string `json:"decoded"`
}

// refDecode is the text of ids.
type refDecode struct {
	IDs  []int  `json:"ids"`
	Text string `json:"text"`
}

// llama2Dir returns the directory scripts/install-tokenizer-ref.sh builds
// Llama 2's tokenizer.json and its expected encodings in. Without it the
// test is skipped locally, and fails when CI or ZBENCH_REQUIRE_REF is set.
func llama2Dir(t *testing.T) string {
	t.Helper()
	ref := os.Getenv("ZBENCH_TOKENIZER_REF")
	if ref == "" {
		ref = filepath.Join("..", "..", ".cache", "tokenizer-ref")
	}
	dir := filepath.Join(ref, "llama2")
	if _, err := os.Stat(filepath.Join(dir, "expected.json")); err != nil {
		msg := "the Llama 2 tokenizer reference is missing (" + err.Error() + "): run scripts/install-tokenizer-ref.sh (make tokenizer-ref)"
		if os.Getenv("CI") != "" || os.Getenv("ZBENCH_REQUIRE_REF") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// TestLlama2Reference compares encoding and decoding with Llama 2's
// vocabulary, in both layouts of its tokenizer.json, with Hugging Face's
// tokenizers, token for token.
func TestLlama2Reference(t *testing.T) {
	dir := llama2Dir(t)
	data, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	require.NoError(t, err)
	var exp refExpected
	require.NoError(t, json.Unmarshal(data, &exp))
	require.Len(t, exp.Layouts, 2)
	t.Logf("reference: %s", exp.Reference)
	for name, layout := range exp.Layouts {
		t.Run(name, func(t *testing.T) {
			for _, load := range []struct {
				name string
				path string
			}{
				{"file", filepath.Join(dir, layout.File)},
				{"dir", filepath.Dir(filepath.Join(dir, layout.File))},
			} {
				tok, err := tokenizer.Load(load.path)
				require.NoError(t, err)
				require.Equal(t, 32000, tok.VocabSize())
				require.Equal(t, 1, tok.BOS())
				require.Equal(t, 2, tok.EOS())
				t.Run(load.name, func(t *testing.T) {
					checkReference(t, tok, layout)
				})
			}
		})
	}
}

// checkReference checks tok's encodings and decodings against a
// reference library's.
func checkReference(t *testing.T, tok *tokenizer.Tokenizer, layout refLayout) {
	t.Helper()
	for _, c := range layout.Cases {
		assert.Equal(t, c.IDs, nonNil(tok.Encode(c.Text, true)), "Encode(%s, true)", c.Name)
		assert.Equal(t, c.Plain, nonNil(tok.Encode(c.Text, false)), "Encode(%s, false)", c.Name)
		got, err := tok.Decode(c.IDs)
		require.NoError(t, err)
		assert.Equal(t, c.Decoded, got, "Decode(Encode(%s))", c.Name)
		assert.Equal(t, c.Decoded, streamed(tok, c.IDs), "Stream of %s", c.Name)
	}
	for _, d := range layout.Decodes {
		got, err := tok.Decode(d.IDs)
		require.NoError(t, err)
		assert.Equal(t, d.Text, got, "Decode(%v)", d.IDs)
		assert.Equal(t, d.Text, streamed(tok, d.IDs), "Stream of %v", d.IDs)
	}
}

// nonNil turns a nil slice into an empty one, as JSON's [] reads.
func nonNil(ids []int) []int {
	if ids == nil {
		return []int{}
	}
	return ids
}

// streamed decodes ids through a Stream.
func streamed(tok *tokenizer.Tokenizer, ids []int) string {
	s := tok.NewStream()
	var out string
	for _, id := range ids {
		out += s.Push(id)
	}
	return out + s.Flush()
}
