package golden_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/internal/golden"
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
)

var globals = map[string]string{"format": "test", "reference": "torch test", "script": "test", "seed": "0"}

// write writes a safetensors file of tensors and metadata to a temporary
// folder and returns its path.
func write(t *testing.T, tensors []safetensors.Tensor, meta map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, tensors, meta))
	path := filepath.Join(t.TempDir(), "g.safetensors")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

func zeros(name string, shape ...int) safetensors.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: make([]byte, 4*n)}
}

// with returns globals and kv.
func with(kv ...string) map[string]string {
	m := map[string]string{}
	for k, v := range globals {
		m[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestOpen(t *testing.T) {
	f, err := golden.Open("kernels")
	require.NoError(t, err)
	dir, err := golden.Dir()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "kernels.safetensors"), f.Path())
	abs, err := filepath.Abs(filepath.Join("..", "..", "testdata", "golden"))
	require.NoError(t, err)
	assert.Equal(t, abs, dir)
	require.NotEmpty(t, f.Names())
	assert.IsIncreasing(t, f.Names())
	require.NoError(t, f.Canonical())

	_, err = golden.Open("no-such-file")
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestOpenErrors checks that a corrupt, truncated or mismatched golden
// file is reported clearly rather than skipped or misread.
func TestOpenErrors(t *testing.T) {
	good := []safetensors.Tensor{zeros("mm/a", 3, 4), zeros("mm/b", 4, 5)}
	t.Run("corrupt", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "corrupt.safetensors")
		require.NoError(t, os.WriteFile(path, []byte("\x0f\x00\x00\x00\x00\x00\x00\x00{\"a\": not json}"), 0o644))
		_, err := golden.OpenPath(path)
		require.ErrorIs(t, err, safetensors.ErrInvalid)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "invalid JSON header")
	})
	t.Run("truncated", func(t *testing.T) {
		f, err := golden.Open("kernels")
		require.NoError(t, err)
		b, err := os.ReadFile(f.Path())
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "truncated.safetensors")
		require.NoError(t, os.WriteFile(path, b[:len(b)-100], 0o644))
		_, err = golden.OpenPath(path)
		require.ErrorIs(t, err, safetensors.ErrInvalid)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "out of range")
	})
	tests := []struct {
		name    string
		tensors []safetensors.Tensor
		meta    map[string]string
		want    string
	}{
		{"not a golden file", []safetensors.Tensor{zeros("w", 2)}, nil, `metadata has no "format"`},
		{"tensor outside a case", []safetensors.Tensor{zeros("w", 2)}, with(), `tensor "w" is not named <case>/<role>`},
		{"case without params", good, with(), `case "mm" has tensors but no parameters`},
		{"params without case", good, with("mm", "{}", "gone", "{}"), `metadata key "gone" names no case with tensors`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := golden.OpenPath(write(t, tc.tensors, tc.meta))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestCases(t *testing.T) {
	type params struct {
		Op string `json:"op"`
		N  int    `json:"n"`
	}
	tensors := []safetensors.Tensor{zeros("a/x", 1), zeros("b/x", 1)}
	f, err := golden.OpenPath(write(t, tensors, with("a", `{"op":"cast","n":3}`, "b", `{"op":"gemm"}`)))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, f.Names())
	cases, err := golden.Cases[params](f)
	require.NoError(t, err)
	assert.Equal(t, map[string]params{"a": {"cast", 3}, "b": {"gemm", 0}}, cases)

	f, err = golden.OpenPath(write(t, tensors, with("a", `{"op":"cast","n":3}`, "b", `{"op":`)))
	require.NoError(t, err)
	_, err = golden.Cases[params](f)
	assert.ErrorContains(t, err, `case "b"`)
}

func TestCanonical(t *testing.T) {
	path := write(t, []safetensors.Tensor{zeros("a/x", 2)}, with("a", "{}"))
	f, err := golden.OpenPath(path)
	require.NoError(t, err)
	require.NoError(t, f.Canonical())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(b, 0), 0o644))
	assert.ErrorContains(t, f.Canonical(), "differs from its canonical serialization")
}

func TestReadRole(t *testing.T) {
	i32 := safetensors.Tensor{Name: "c/ids", DType: "I32", Shape: []int{2}, Data: []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}}
	f, err := golden.OpenPath(write(t, []safetensors.Tensor{zeros("c/x", 2, 3), i32}, with("c", `{"op":"x"}`)))
	require.NoError(t, err)
	x, err := golden.ReadRole(f.File, "c", "x", kernels.F16)
	require.EqualError(t, err, `role "x" is F32, want f16`)
	assert.Nil(t, x.F32)
	x, err = golden.ReadRole(f.File, "c", "x", kernels.F32)
	require.NoError(t, err)
	assert.Equal(t, kernels.Shape{2, 3}, x.Shape)
	assert.Equal(t, make([]float64, 6), x.Values())
	ids, err := golden.ReadRole(f.File, "c", "ids", kernels.I32)
	require.NoError(t, err)
	assert.Equal(t, []int32{1, -1}, ids.I32)
	assert.Equal(t, []float64{1, -1}, ids.Values())
	_, err = golden.ReadRole(f.File, "c", "y", kernels.I32)
	require.ErrorIs(t, err, safetensors.ErrNotFound)
}

func TestCompare(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name      string
		got, want []float64
		tol       float64
		err       string
	}{
		{"within", []float64{1, 2.001}, []float64{1, 2}, 1e-3, ""},
		{"beyond", []float64{1, 2.1}, []float64{1, 2}, 1e-3, "rel-err 0.0447 > tolerance 0.001, max-abs 0.1"},
		{"NaN output", []float64{1, nan}, []float64{1, 2}, 1e-3, "rel-err NaN > tolerance 0.001, max-abs NaN"},
		{"length", []float64{1}, []float64{1, 2}, 1e-3, "1 values, want 2"},
		{"exact", []float64{1, 2}, []float64{1, 2}, 0, ""},
		{"exact NaN", []float64{nan}, []float64{nan}, 0, ""},
		{"not exact", []float64{1, 2.001}, []float64{1, 2}, 0, "differs at 1: got 2.001, want 2"},
		{"non-finite in place", []float64{nan, inf, 1.0001}, []float64{nan, inf, 1}, 1e-3, ""},
		{"NaN missing", []float64{0, inf, 1}, []float64{nan, inf, 1}, 1e-3, "[0] = 0, want NaN"},
		{"infinity missing", []float64{nan, 5, 1}, []float64{nan, inf, 1}, 1e-3, "[1] = 5, want +Inf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := golden.Compare(tc.got, tc.want, tc.tol)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.err)
		})
	}
}

func TestProvenanceOpRaw(t *testing.T) {
	u8 := safetensors.Tensor{Name: "b/codes", DType: "U8", Shape: []int{2}, Data: []byte{1, 2}}
	meta := with("a", `{"op":"cast"}`, "b", `{"op":"gemm"}`, "c", `{"op":"cast"}`)
	f, err := golden.OpenPath(write(t, []safetensors.Tensor{zeros("a/x", 1), u8, zeros("c/x", 1)}, meta))
	require.NoError(t, err)
	require.NoError(t, f.Provenance("test"))
	meta["reference"] = "numpy 1.24"
	g, err := golden.OpenPath(write(t, []safetensors.Tensor{zeros("a/x", 1), u8, zeros("c/x", 1)}, meta))
	require.NoError(t, err)
	require.EqualError(t, g.Provenance("test"), fmt.Sprintf("golden %s: reference %q, want torch <version>", g.Path(), "numpy 1.24"))

	cast, err := f.Op("cast")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "c"}, cast)
	assert.Equal(t, []string{"b"}, f.RequireOp(t, "gemm"))
	none, err := f.Op("none")
	require.NoError(t, err)
	assert.Empty(t, none)

	assert.Equal(t, []byte{1, 2}, f.RequireRaw(t, "b", "codes", "U8").Data)
	_, err = f.Raw("b", "codes", "I8")
	require.ErrorContains(t, err, `role "codes" of case "b" is U8, want I8`)
	_, err = f.Raw("b", "x", "U8")
	require.ErrorIs(t, err, safetensors.ErrNotFound)
	v, shape := f.RequireF32(t, "a", "x")
	assert.Equal(t, []float32{0}, v)
	assert.Equal(t, []int{1}, shape)

	k := golden.Require(t, "kernels", "testdata/reference/kernels.py")
	require.ErrorContains(t, k.Provenance("testdata/reference/fp8.py"), `written by "testdata/reference/kernels.py", want "testdata/reference/fp8.py"`)
	cases := golden.RequireCases[struct {
		Op string `json:"op"`
	}](t, k)
	assert.Len(t, cases, len(k.Names()))
}
