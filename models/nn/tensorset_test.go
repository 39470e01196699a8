package nn_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/nn"
)

// cpuBackend returns a CPU backend that must have nothing allocated when
// the test ends.
func cpuBackend(t *testing.T) kernels.Backend {
	t.Helper()
	be := cpu.New()
	t.Cleanup(func() { assert.Zero(t, be.MemStats().CurrentBytes, "everything freed") })
	return be
}

func TestTensorSet(t *testing.T) {
	be := cpuBackend(t)
	s := nn.NewTensorSet(be)
	a, err := s.Alloc("a", kernels.F32, 2, 3)
	require.NoError(t, err)
	assert.Equal(t, kernels.Shape{2, 3}, a.Shape())
	u, err := s.Upload("u", kernels.BF16, []float32{1, 2, 3}, 3)
	require.NoError(t, err)
	assert.Equal(t, kernels.BF16, u.DType())
	i, err := s.Ints("i", []int32{4, 5}, 2)
	require.NoError(t, err)
	anon, err := s.Alloc("", kernels.F16, 4)
	require.NoError(t, err)
	require.NotNil(t, anon)

	for name, want := range map[string]*kernels.Tensor{"a": a, "u": u, "i": i, "": nil, "nope": nil} {
		assert.Same(t, want, s.Get(name), "Get(%q)", name)
	}
	v, err := kernels.ToFloat32(s.Get("u"))
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, v)
	ids, err := kernels.ToInt32(s.Get("i"))
	require.NoError(t, err)
	assert.Equal(t, []int32{4, 5}, ids)
	assert.Positive(t, be.MemStats().CurrentBytes)

	require.NoError(t, s.Free())
	assert.Zero(t, be.MemStats().CurrentBytes)
	assert.Nil(t, s.Get("a"), "a freed set is empty")
	require.NoError(t, s.Free(), "freeing twice frees nothing twice")
}

func TestTensorSetRelease(t *testing.T) {
	be := cpuBackend(t)
	s := nn.NewTensorSet(be)
	a, err := s.Alloc("a", kernels.F32, 4)
	require.NoError(t, err)
	b, err := s.Alloc("b", kernels.I8, 8)
	require.NoError(t, err)
	require.NoError(t, s.Release(a))
	assert.True(t, a.Freed())
	assert.Nil(t, s.Get("a"), "a's name is forgotten")
	assert.Same(t, b, s.Get("b"))
	assert.Equal(t, int64(8), s.Bytes())
	require.ErrorIs(t, s.Release(a), kernels.ErrValue, "released twice")
	require.NoError(t, s.Free())
}

func TestTensorSetErrors(t *testing.T) {
	be := cpuBackend(t)
	s := nn.NewTensorSet(be)
	defer func() { require.NoError(t, s.Free()) }()
	for _, tc := range []struct {
		name string
		make func() (*kernels.Tensor, error)
		want string
	}{
		{"alloc, negative dimension", func() (*kernels.Tensor, error) { return s.Alloc("x", kernels.F32, 2, -1) }, "x: "},
		{"upload, wrong length", func() (*kernels.Tensor, error) { return s.Upload("y", kernels.F32, []float32{1}, 2) }, "y: "},
		{"ints, wrong length", func() (*kernels.Tensor, error) { return s.Ints("z", []int32{1, 2, 3}, 2) }, "z: "},
		{"unnamed", func() (*kernels.Tensor, error) { return s.Alloc("", kernels.F32, -1) }, "cpu: alloc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := tc.make()
			require.Error(t, err)
			assert.Nil(t, x)
			assert.True(t, strings.HasPrefix(err.Error(), tc.want), "%q names the tensor", err)
		})
	}
	for _, n := range []string{"x", "y", "z"} {
		assert.Nil(t, s.Get(n), "a failed tensor is not remembered")
	}
}

func TestAllocatorKeepsTheFirstError(t *testing.T) {
	be := cpuBackend(t)
	s := nn.NewTensorSet(be)
	defer func() { require.NoError(t, s.Free()) }()
	a := nn.Allocator{Set: s}
	x := a.Tensor(kernels.F32, 2, 3)
	require.NotNil(t, x)
	x6 := a.View(x, 6)
	require.NotNil(t, x6)
	assert.Equal(t, kernels.Shape{6}, x6.Shape())
	ids := a.Ints("ids", []int32{1, 2}, 2)
	empty := a.Ints("empty", nil, 3)
	require.NoError(t, a.Err())
	assert.Same(t, ids, s.Get("ids"))
	assert.Same(t, empty, s.Get("empty"))
	assert.Equal(t, kernels.I32, empty.DType())
	used := be.MemStats().CurrentBytes

	assert.Nil(t, a.View(x, 5), "a view of the wrong size")
	first := a.Err()
	require.ErrorIs(t, first, kernels.ErrShape)
	// After the error nothing is allocated and the error stays the first.
	assert.Nil(t, a.Tensor(kernels.F32, 4))
	assert.Nil(t, a.Ints("more", []int32{1}, 1))
	assert.Nil(t, a.Ints("more", nil, 1))
	assert.Nil(t, a.View(x, 6))
	assert.Equal(t, first, a.Err())
	assert.Equal(t, used, be.MemStats().CurrentBytes)
	assert.Nil(t, s.Get("more"))
}

// mapSource supplies fixed values.
type mapSource map[string][]float32

func (m mapSource) Values(p nn.Param) ([]float32, error) { return m[p.Name], nil }

func TestLoadParams(t *testing.T) {
	be := cpuBackend(t)
	params := []nn.Param{{"w", []int{2, 2}}, {"b", []int{2}}}
	src := mapSource{"w": {1, 2, 3, 4}, "b": {0.5, -0.5}}
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			s := nn.NewTensorSet(be)
			defer func() { require.NoError(t, s.Free()) }()
			require.NoError(t, nn.LoadParams(s, src, params, dt))
			for _, p := range params {
				x := s.Get(p.Name)
				require.NotNil(t, x, p.Name)
				assert.Equal(t, dt, x.DType())
				assert.Equal(t, kernels.Shape(p.Shape), x.Shape())
				v, err := kernels.ToFloat32(x)
				require.NoError(t, err)
				assert.Equal(t, src[p.Name], v)
			}
		})
	}
	// A source's error comes back as it is; what was uploaded stays in
	// the set, for the caller to free.
	s := nn.NewTensorSet(be)
	err := nn.LoadParams(s, mapSource{"w": {1, 2, 3, 4}, "b": {1}}, params, kernels.F32)
	require.Error(t, err)
	assert.ErrorContains(t, err, "b: ")
	assert.NotNil(t, s.Get("w"))
	require.NoError(t, s.Free())
}
