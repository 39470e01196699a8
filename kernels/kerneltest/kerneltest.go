// Package kerneltest is the conformance suite every zbench backend runs: each
// operation is checked against a float64 reference written here, on fresh
// random inputs of awkward sizes, with outputs poisoned by NaN beforehand
// (and so checked to be written in full) and inputs checked unchanged
// afterwards. Accuracy is the relative error ‖out−ref‖/‖ref‖ within a
// tolerance per dtype.
//
// A backend's test is one line:
//
//	func TestConformance(t *testing.T) { kerneltest.Run(t, cpu.New()) }
package kerneltest

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

// A test checks one operation on a backend.
type test struct {
	name string
	fn   func(e *env)
}

// suites lists the groups of tests; each file of the package adds its own.
var suites [][]test

// Run runs the whole suite on b, one subtest per operation and case.
func Run(t *testing.T, b kernels.Backend) {
	for _, s := range suites {
		for _, tc := range s {
			t.Run(tc.name, func(t *testing.T) {
				e := &env{T: t, b: b, rng: rand.New(rand.NewPCG(uint64(len(tc.name)), 0x5eed))}
				defer e.finish()
				tc.fn(e)
			})
		}
	}
}

// env is one test's backend, random source and the inputs to re-check.
type env struct {
	*testing.T
	b      kernels.Backend
	rng    *rand.Rand
	inputs []snapshot
	owned  []*kernels.Tensor
}

type snapshot struct {
	name string
	t    *kernels.Tensor
	data []byte
}

// group returns the backend's op group G, failing the test with
// kernels.Group's error (which names the backend and the group) where the
// backend lacks it: for the groups every backend implements.
func group[G any](e *env) G {
	e.Helper()
	g, err := kernels.Group[G](e.b)
	require.NoError(e, err)
	return g
}

// optionalGroup returns the backend's op group G, skipping the test with
// kernels.Group's error as the reason where the backend lacks it (or, for
// FP8, its device cannot run it).
func optionalGroup[G any](e *env) G {
	e.Helper()
	g, err := kernels.Group[G](e.b)
	if err != nil {
		e.Skip(err.Error())
	}
	return g
}

// Uniform returns an input tensor of uniform values in [lo, hi), rounded to
// dt, and its values in float64.
func (e *env) Uniform(name string, dt kernels.DType, lo, hi float64, shape ...int) (*kernels.Tensor, []float64) {
	e.Helper()
	vals := make([]float64, kernels.Shape(shape).Len())
	for i := range vals {
		vals[i] = lo + (hi-lo)*e.rng.Float64()
	}
	return e.inputFromValues(name, dt, vals, shape...)
}

// Input is Uniform over [-1, 1).
func (e *env) Input(name string, dt kernels.DType, shape ...int) (*kernels.Tensor, []float64) {
	e.Helper()
	return e.Uniform(name, dt, -1, 1, shape...)
}

// Ints returns an I32 input tensor holding vals.
func (e *env) Ints(name string, vals []int32, shape ...int) *kernels.Tensor {
	e.Helper()
	t, err := kernels.FromInt32(e.b, vals, shape...)
	require.NoError(e, err, "upload %s", name)
	e.track(name, t)
	return t
}

// RandInts returns n values uniform in [0, hi).
func (e *env) RandInts(n, hi int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(e.rng.IntN(hi))
	}
	return out
}

func (e *env) track(name string, t *kernels.Tensor) {
	buf := make([]byte, t.Bytes())
	require.NoError(e, e.b.Download(buf, t))
	e.inputs = append(e.inputs, snapshot{name, t, buf})
	e.owned = append(e.owned, t)
}

// Output returns an output tensor filled with NaN, so that an element the
// op fails to write is caught.
func (e *env) Output(dt kernels.DType, shape ...int) *kernels.Tensor {
	e.Helper()
	poison := float32(math.NaN())
	if !dt.IsFloat() { // integers have no NaN: poison with an unlikely value
		poison = -12345
	}
	vals := make([]float32, kernels.Shape(shape).Len())
	for i := range vals {
		vals[i] = poison
	}
	t, err := kernels.FromFloat32(e.b, dt, vals, shape...)
	require.NoError(e, err)
	e.owned = append(e.owned, t)
	return t
}

// Check downloads out and requires it to be fully written (no NaN) and
// within tol of want in relative L2 error (tol 0 means Tolerance of out's
// dtype).
func (e *env) Check(name string, out *kernels.Tensor, want []float64, tol float64) {
	e.Helper()
	require.NoError(e, e.b.Sync())
	got, err := kernels.ToFloat32(out)
	require.NoError(e, err, "download %s", name)
	require.Len(e, got, len(want), "%s length", name)
	for i, v := range got {
		if v != v {
			require.Failf(e, "output not fully written", "%s[%d] is still NaN (of %d elements; reference %g)", name, i, len(got), want[i])
		}
	}
	if tol == 0 {
		tol = kernels.Tolerance(out.DType())
	}
	rel, maxAbs := kernels.RelErr(widen(got), want)
	require.LessOrEqualf(e, rel, tol, "%s: rel-err %.3g > %.3g (max-abs %.3g) on %v", name, rel, tol, maxAbs, out)
}

// finish checks that every input is unchanged and frees what the test made.
func (e *env) finish() {
	for _, s := range e.inputs {
		buf := make([]byte, len(s.data))
		if err := e.b.Download(buf, s.t); err == nil && !bytes.Equal(buf, s.data) {
			e.Errorf("input %s was modified by the op", s.name)
		}
	}
	for _, t := range e.owned {
		if !t.Freed() {
			_ = e.b.Free(t)
		}
	}
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// Name formats a subtest name from key=value pairs.
func name(op string, kv ...any) string {
	s := op
	for i := 0; i+1 < len(kv); i += 2 {
		s += fmt.Sprintf("/%v=%v", kv[i], kv[i+1])
	}
	return s
}
