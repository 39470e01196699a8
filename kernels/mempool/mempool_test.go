package mempool

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func TestClass(t *testing.T) {
	for _, tc := range []struct{ n, want int64 }{
		{1, 512}, {512, 512}, {513, 1024}, {1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + 1<<18}, {3 << 20, 3 << 20}, {(3 << 20) + 1, 7 << 19},
	} {
		assert.Equal(t, tc.want, Class(tc.n), "Class(%d)", tc.n)
		assert.GreaterOrEqual(t, Class(tc.n), tc.n)
	}
}

func TestPoolReuseAndStats(t *testing.T) {
	var live, released int
	p := New(func(n int64) ([]byte, error) { live++; return make([]byte, n), nil },
		func([]byte) { released++ }, 0)
	a, ca, err := p.Get(1000)
	require.NoError(t, err)
	require.Len(t, a, 1024)
	p.Put(a, ca)
	b, cb, err := p.Get(900)
	require.NoError(t, err)
	assert.Equal(t, ca, cb)
	assert.Equal(t, 1, live, "second request of the same class must reuse the block")
	s := p.Stats()
	assert.Equal(t, kernels.MemStats{Allocs: 2, Hits: 1, Returns: 1, CurrentBytes: 1024, PeakBytes: 1024}, s)
	assert.InDelta(t, 0.5, s.HitRate(), 1e-12)
	p.Put(b, cb)
	p.Trim()
	assert.Equal(t, 1, released)
	assert.Zero(t, p.Stats().CachedBytes)
}

func TestPoolLimit(t *testing.T) {
	p := New(func(n int64) ([]byte, error) { return make([]byte, n), nil }, func([]byte) {}, 4096)
	_, _, err := p.Get(4096)
	require.NoError(t, err)
	_, _, err = p.Get(1)
	require.Error(t, err)
	assert.True(t, errors.Is(err, kernels.ErrOutOfMemory))
	assert.Contains(t, err.Error(), "request of 1 bytes")
}
