package cpu

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
)

func TestHostBuf(t *testing.T) {
	for _, n := range []int64{1, 7, 4096, hugeMin - 1, hugeMin, hugeMin + 5, 9 << 20} {
		h, err := newHostBuf(n)
		require.NoError(t, err)
		require.Len(t, h.buf, int(n))
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(h.buf)))
		assert.Zero(t, addr%8, "n %d: 8-byte aligned", n)
		if runtime.GOOS == "linux" {
			assert.Equal(t, n >= hugeMin, h.mapped, "n %d: a mapping of its own from hugeMin", n)
		}
		// Fresh memory reads as zero and takes writes to its last byte.
		for _, i := range []int64{0, n / 2, n - 1} {
			require.Zero(t, h.buf[i], "n %d at %d", n, i)
		}
		h.buf[n-1] = 0xa5
		h.release()
		assert.False(t, h.mapped)
	}
}

// TestHostBufDropped checks that a mapping dropped without release is
// unmapped by its cleanup, without a crash, and that the backend's Trim
// releases cached blocks.
func TestHostBufDropped(t *testing.T) {
	for range 8 {
		h, err := newHostBuf(hugeMin)
		require.NoError(t, err)
		h.buf[0] = 1
	}
	runtime.GC()
	runtime.GC()
	b := New()
	x, err := b.Alloc(kernels.F32, 1<<20)
	require.NoError(t, err)
	f32(x)[1<<20-1] = 3
	require.NoError(t, b.Free(x))
	assert.Equal(t, int64(4<<20), b.MemStats().CachedBytes)
	b.TrimCache()
	assert.Zero(t, b.MemStats().CachedBytes)
}
