package golden

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
)

// Require opens testdata/golden/<name>.safetensors in a test and checks
// that script wrote it (Provenance), failing t otherwise.
func Require(t testing.TB, name, script string) *File {
	t.Helper()
	f, err := Open(name)
	require.NoError(t, err, "regenerate with /usr/bin/python3 %s", script)
	require.NoError(t, f.Provenance(script))
	return f
}

// RequireCases is Cases, failing t on an error.
func RequireCases[C any](t testing.TB, f *File) map[string]C {
	t.Helper()
	cases, err := Cases[C](f)
	require.NoError(t, err)
	return cases
}

// RequireOp is Op, failing t on an error.
func (f *File) RequireOp(t testing.TB, op string) []string {
	t.Helper()
	names, err := f.Op(op)
	require.NoError(t, err)
	return names
}

// RequireF32 returns the F32 role of case name (its values bit for bit,
// NaN payloads included) and its shape, failing t on an error.
func (f *File) RequireF32(t testing.TB, name, role string) ([]float32, []int) {
	t.Helper()
	r, err := ReadRole(f.File, name, role, kernels.F32)
	require.NoError(t, err, "golden %s", f.path)
	return r.F32, r.Shape
}

// RequireI32 returns the I32 role of case name, failing t on an error.
func (f *File) RequireI32(t testing.TB, name, role string) []int32 {
	t.Helper()
	r, err := ReadRole(f.File, name, role, kernels.I32)
	require.NoError(t, err, "golden %s", f.path)
	return r.I32
}

// RequireRaw is Raw, failing t on an error.
func (f *File) RequireRaw(t testing.TB, name, role, dtype string) safetensors.Tensor {
	t.Helper()
	r, err := f.Raw(name, role, dtype)
	require.NoError(t, err)
	return r
}
