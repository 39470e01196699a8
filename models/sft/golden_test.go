package sft_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/sft"
	"github.com/zbench/zbench/models/tokenizer"
)

// root is the repository's root, from this package's folder.
var root = filepath.Join("..", "..")

var (
	samplePath = filepath.Join(root, "testdata", "alpaca", "sample.json")
	tinyDir    = filepath.Join(root, "testdata", "golden", "llama-tiny")
)

// alpacaGolden is testdata/golden/alpaca-tiny.json, written by
// testdata/reference/alpaca.py.
type alpacaGolden struct {
	Tokenizer string            `json:"tokenizer"`
	Sample    string            `json:"sample"`
	Files     map[string]string `json:"files"`
	Reference map[string]string `json:"reference"`
	Examples  []struct {
		InputIDs []int32 `json:"input_ids"`
		Labels   []int32 `json:"labels"`
	} `json:"examples"`
}

func readAlpacaGolden(t *testing.T) alpacaGolden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "testdata", "golden", "alpaca-tiny.json"))
	require.NoError(t, err)
	var g alpacaGolden
	require.NoError(t, json.Unmarshal(data, &g))
	require.NotEmpty(t, g.Examples)
	require.Len(t, g.Files, 2)
	for name, sum := range g.Files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		require.NoError(t, err)
		got := sha256.Sum256(data)
		require.Equal(t, sum, hex.EncodeToString(got[:]), "%s changed since testdata/reference/alpaca.py wrote the golden file: run it again", name)
	}
	return g
}

// TestAlpacaGolden formats the sample with our tokenizer and compares it
// with the reference's SentencePiece formatting, token for token.
func TestAlpacaGolden(t *testing.T) {
	g := readAlpacaGolden(t)
	t.Logf("reference: %v", g.Reference)
	require.Equal(t, filepath.ToSlash(filepath.Join("testdata", "alpaca", "sample.json")), g.Sample)
	recs, err := sft.ReadAlpaca(samplePath)
	require.NoError(t, err)
	require.Len(t, g.Examples, len(recs))
	tests := []struct {
		name, path string
	}{
		{"tokenizer.model", filepath.Join(root, filepath.FromSlash(g.Tokenizer))},
		{"dir", tinyDir}, // tokenizer.json with tokenizer_config.json
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := tokenizer.Load(tt.path)
			require.NoError(t, err)
			got := sft.Format(tok, recs)
			require.Len(t, got, len(g.Examples))
			for i, want := range g.Examples {
				assert.Equal(t, want.InputIDs, got[i].IDs, "record %d: ids", i)
				assert.Equal(t, want.Labels, got[i].Labels, "record %d: labels", i)
			}
			// Read formats the same file the same way.
			read, err := sft.Read(samplePath, tok)
			require.NoError(t, err)
			assert.Equal(t, got, read)
		})
	}
}

// TestSample checks the sample's variety: what the package says it
// exercises.
func TestSample(t *testing.T) {
	recs, err := sft.ReadAlpaca(samplePath)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(recs), 20)
	withInput, multiLine, nonASCII := 0, 0, 0
	for _, r := range recs {
		if r.Input != "" {
			withInput++
		}
		for _, s := range []string{r.Instruction, r.Input, r.Output} {
			for _, c := range s {
				if c > 127 {
					nonASCII++
					break
				}
			}
		}
		for _, c := range r.Output {
			if c == '\n' {
				multiLine++
				break
			}
		}
	}
	assert.Greater(t, withInput, len(recs)/5)
	assert.Less(t, withInput, len(recs)/2)
	assert.Greater(t, multiLine, 2)
	assert.Greater(t, nonASCII, 2)
}
