package membw

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSum(t *testing.T) {
	for _, n := range []int{0, 7, 8, 255, 256, 257, 1024, 4096 + 24, 1 << 20} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i*7 + 3)
		}
		var want uint64
		for i := 0; i+8 <= n; i += 8 {
			want += binary.LittleEndian.Uint64(p[i:])
		}
		assert.Equal(t, want, Sum(p), "n=%d", n)
	}
}

func TestBufferSize(t *testing.T) {
	for _, tc := range []struct {
		cache, want int64
	}{
		{1 << 20, 128 << 20},    // 256 MiB in all at least
		{32 << 20, 256 << 20},   // sixteen times the cache
		{48<<20 + 3, 384 << 20}, // a whole number of blocks
		{1 << 30, 512 << 20},    // 1 GiB in all at most
	} {
		got := bufferSize(tc.cache)
		assert.Equal(t, tc.want, got, "cache %d", tc.cache)
		assert.Zero(t, got%(block*64), "cache %d", tc.cache)
	}
}

func TestProbe(t *testing.T) {
	p := New(1 << 20)
	assert.Equal(t, 128<<20, len(p.src), "256 MiB in all at least")
	assert.Equal(t, len(p.src), len(p.dst))
	for name, rate := range map[string]float64{"copy": p.Copy(), "read": p.Read()} {
		// Any machine that runs the tests moves between 100 MB/s and
		// 10 TB/s; a rate outside is a broken timer or a dropped pass.
		assert.Greater(t, rate, 1e8, name)
		assert.Less(t, rate, 1e13, name)
		t.Logf("%s %.1f GB/s", name, rate/1e9)
	}
}

func TestPass(t *testing.T) {
	p := New(1 << 20)
	size := len(p.src)
	clear(p.dst)
	for _, tc := range []struct {
		name      string
		read      bool
		n         int
		wantBytes int
		wantNext  int // where the next window starts
	}{
		{"a window of a third", false, size / 3, 2 * (size / 3 / block * block), size / 3 / block * block},
		{"the next third", true, size / 3, 2 * (size / 3 / block * block), 2 * (size / 3 / block * block)},
		{"too long for what is left: from the start", false, size / 2, size, size / 2},
		{"more than the buffers: all of them", true, 4 * size, 2 * size, size},
		{"less than a block: one block", true, 1, 2 * block, block},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bytes, d := p.Pass(tc.read, tc.n)
			assert.Equal(t, tc.wantBytes, bytes)
			assert.Positive(t, d)
			assert.Equal(t, tc.wantNext, p.next)
		})
	}
	// The copies' windows, [0, size/3) and [0, size/2), reached dst; the
	// rest of it is as cleared.
	half := size / 2
	assert.Equal(t, p.src[:half], p.dst[:half])
	assert.Equal(t, make([]byte, size-half), p.dst[half:])
}
