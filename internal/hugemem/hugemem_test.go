package hugemem

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMap(t *testing.T) {
	for _, n := range []int64{1, Page - 1, Page, Page + 5, 9 << 20} {
		b, ok := Map(n)
		if runtime.GOOS != "linux" {
			assert.False(t, ok, "no mapping off Linux")
			continue
		}
		require.True(t, ok, "n %d", n)
		require.Len(t, b, int(n))
		assert.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(b)))%Page, "n %d: on a page boundary", n)
		assert.Zero(t, cap(b)%Page, "n %d: whole pages", n)
		assert.GreaterOrEqual(t, cap(b), int(n))
		// Fresh memory reads as zero and takes writes up to its capacity.
		for _, i := range []int64{0, n / 2, n - 1} {
			require.Zero(t, b[i], "n %d at %d", n, i)
		}
		b[:cap(b)][cap(b)-1] = 0xa5
		Unmap(b)
	}
}
