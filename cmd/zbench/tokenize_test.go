package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tokenizerGolden is the part of testdata/golden/tokenizer-tiny.json (the
// tiny checkpoint's tokenizer files run through SentencePiece and Hugging
// Face's tokenizers by testdata/reference/tokenizer.py) tokenize is checked
// against.
type tokenizerGolden struct {
	Cases []struct {
		Name string                `json:"name"`
		Text string                `json:"text"`
		SPM  tokenizerGoldenResult `json:"spm"`
		HF   tokenizerGoldenResult `json:"hf"`
	} `json:"cases"`
}

type tokenizerGoldenResult struct {
	IDs     []int  `json:"ids"`
	Plain   []int  `json:"plain"`
	Decoded string `json:"decoded"`
}

func readTokenizerGolden(t *testing.T) tokenizerGolden {
	t.Helper()
	data, err := os.ReadFile("../../testdata/golden/tokenizer-tiny.json")
	require.NoError(t, err)
	var g tokenizerGolden
	require.NoError(t, json.Unmarshal(data, &g))
	require.NotEmpty(t, g.Cases)
	return g
}

func tokenize(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	require.NoError(t, run(append([]string{"tokenize"}, args...), &out, &errOut), errOut.String())
	return out.String()
}

// TestTokenizeGolden encodes every golden text with the tiny checkpoint's
// tokenizer.json (the directory) and tokenizer.model, with and without the
// special tokens, and decodes the ids back, against the reference
// libraries' results.
func TestTokenizeGolden(t *testing.T) {
	g := readTokenizerGolden(t)
	for _, tc := range []struct {
		name, path string
		hf         bool
	}{
		{"directory", llamaTiny, true},
		{"tokenizer.model", filepath.Join(llamaTiny, "tokenizer.model"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range g.Cases {
				want := c.SPM
				if tc.hf {
					want = c.HF
				}
				var res tokenizeResult
				require.NoError(t, json.Unmarshal([]byte(tokenize(t, "--tokenizer", tc.path, "--format", "json", "--", c.Text)), &res))
				assert.Equal(t, want.IDs, res.IDs, "ids of %s", c.Name)
				assert.Equal(t, len(want.IDs), res.Tokens, "tokens of %s", c.Name)
				assert.Equal(t, c.Text, res.Text)

				plain := tokenize(t, "--tokenizer", tc.path, "--no-special", "--", c.Text)
				assert.Equal(t, joinIDs(want.Plain)+"\n", plain, "plain ids of %s", c.Name)

				if len(want.IDs) > 0 {
					text := tokenize(t, "--tokenizer", tc.path, "--decode", joinIDs(want.IDs))
					assert.Equal(t, want.Decoded+"\n", text, "decoded %s", c.Name)
				}
			}
		})
	}
}

func joinIDs(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ",")
}

func TestTokenizeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"no tokenizer", []string{"hi"}, "missing required flag --tokenizer", 2},
		{"no text", []string{"--tokenizer", llamaTiny}, "want one argument", 2},
		{"two texts", []string{"--tokenizer", llamaTiny, "a", "b"}, "want one argument, the text (or the ids with --decode), got 2", 2},
		{"bad format", []string{"--tokenizer", llamaTiny, "--format", "xml", "hi"}, `unknown --format "xml"`, 2},
		{"bad ids", []string{"--tokenizer", llamaTiny, "--decode", "1,x"}, `ids: "x" is not a token id`, 2},
		{"no-special with decode", []string{"--tokenizer", llamaTiny, "--decode", "--no-special", "1"}, "--no-special applies to encoding", 2},
		{"id outside the vocabulary", []string{"--tokenizer", llamaTiny, "--decode", "1,600"}, "id 600 (at 1) out of range [0, 512)", 1},
		{"missing file", []string{"--tokenizer", "nothing/tokenizer.json", "hi"}, "nothing/tokenizer.json", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(append([]string{"tokenize"}, tc.args...), &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, tc.code, exitCode(err))
		})
	}
}
