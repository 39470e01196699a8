package mempool

import (
	"errors"
	"testing"
	"time"

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

// TestPoolReleaseIdle caches blocks of three classes, uses one of them
// again, and returns a block past the idle time: the classes left unused
// are released, the one used kept; without ReleaseIdle nothing is.
func TestPoolReleaseIdle(t *testing.T) {
	for _, idle := range []time.Duration{0, time.Minute} {
		released := map[int64]int{}
		p := New(func(n int64) ([]byte, error) { return make([]byte, n), nil },
			func(b []byte) { released[int64(len(b))]++ }, 0)
		clock := time.Unix(1000, 0)
		if idle > 0 {
			p.ReleaseIdle(idle)
			p.now = func() time.Time { return clock }
		}
		for _, n := range []int64{512, 1024, 2048} {
			b, c, err := p.Get(n)
			require.NoError(t, err)
			p.Put(b, c)
		}
		clock = clock.Add(40 * time.Second)
		b, c, err := p.Get(1024) // class 1024 used again
		require.NoError(t, err)
		clock = clock.Add(30 * time.Second) // 512 and 2048 idle for 70 s, 1024 for 30 s
		p.Put(b, c)
		if idle == 0 {
			assert.Empty(t, released)
			assert.Equal(t, int64(512+1024+2048), p.Stats().CachedBytes)
			continue
		}
		assert.Equal(t, map[int64]int{512: 1, 2048: 1}, released)
		assert.Equal(t, int64(1024), p.Stats().CachedBytes)
		got, _, err := p.Get(1000)
		require.NoError(t, err)
		assert.Len(t, got, 1024, "the class used within the idle time is still cached")
		assert.Equal(t, int64(2), p.Stats().Hits, "a hit, as the earlier Get of 1024 was")
	}
}
