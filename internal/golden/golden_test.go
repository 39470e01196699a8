package golden_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/internal/golden"
	"github.com/zbench/zbench/models/safetensors"
)

type testCase struct {
	Op string `json:"op"`
	N  int    `json:"n"`
}

func (c testCase) CaseOp() string { return c.Op }

// write writes a golden file of the given metadata and returns its path.
func write(t *testing.T, meta map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, []safetensors.Tensor{{Name: "x", DType: "F32", Shape: []int{1}, Data: make([]byte, 4)}}, meta))
	path := filepath.Join(t.TempDir(), "g.safetensors")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// TestOpen checks provenance, case decoding and Names, and the errors of a
// file from elsewhere and of a case that is not JSON.
func TestOpen(t *testing.T) {
	meta := map[string]string{"format": "pt", "reference": "torch 1.13", "script": "testdata/reference/x.py", "seed": "1",
		"b": `{"op": "sum", "n": 2}`, "a": `{"op": "sum", "n": 1}`, "c": `{"op": "max", "n": 3}`}
	f, err := golden.Open[testCase](write(t, meta), "testdata/reference/x.py")
	require.NoError(t, err)
	assert.Len(t, f.Cases, 3, "the globals are not cases")
	assert.Equal(t, []string{"a", "b"}, f.Names("sum"))
	assert.Equal(t, 3, f.Cases["c"].N)

	_, err = golden.Open[testCase](write(t, meta), "testdata/reference/y.py")
	assert.ErrorContains(t, err, "want testdata/reference/y.py with torch")
	meta["a"] = "not json"
	_, err = golden.Open[testCase](write(t, meta), "testdata/reference/x.py")
	assert.ErrorContains(t, err, `metadata "a"`)
	_, err = golden.Open[testCase](filepath.Join(t.TempDir(), "none"), "testdata/reference/x.py")
	assert.ErrorContains(t, err, "regenerate with /usr/bin/python3 testdata/reference/x.py")
}
