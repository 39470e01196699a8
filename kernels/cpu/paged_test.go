package cpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
)

// TestPagedAttentionPoolBounded attends at every length from 1 to 300, as
// a server's decode steps do: the buffers the keys and values are gathered
// into come back from the pool in a few sizes, so that what the pool
// caches stays within two buffers of each power of two of the length.
func TestPagedAttentionPoolBounded(t *testing.T) {
	be := New()
	const H, P, D, M = 2, 16, 32, 32 // a table row of 512 positions
	k, err := kernels.FromFloat32(be, kernels.F32, seq(M*H*P*D, 0.3), M, H, P, D)
	require.NoError(t, err)
	table := make([]int32, M)
	for i := range table {
		table[i] = int32(M - 1 - i)
	}
	tab, err := kernels.FromInt32(be, table, 1, M)
	require.NoError(t, err)
	q, err := kernels.FromFloat32(be, kernels.F32, seq(4*D, 0.7), 1, 4, 1, D)
	require.NoError(t, err)
	out, err := be.Alloc(kernels.F32, 1, 4, 1, D)
	require.NoError(t, err)
	lens, err := be.Alloc(kernels.I32, 1)
	require.NoError(t, err)
	for n := int32(1); n <= 300; n++ {
		require.NoError(t, kernels.UploadInt32(lens, []int32{n}))
		require.NoError(t, be.PagedAttention(out, q, k, k, tab, lens, 0))
	}
	var bound int64 // the gathered keys and values at each power of two up to 512
	for T := int64(1); T <= 512; T *= 2 {
		bound += 2 * H * T * D * 4
	}
	require.LessOrEqual(t, be.MemStats().CachedBytes, bound)
}
