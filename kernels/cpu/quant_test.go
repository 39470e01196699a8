package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels/cpu/internal/qgemm"
)

// TestDotI8PathsAgree checks the VNNI kernels against the Go loop, bit for
// bit, over shapes that reach every tile edge and mask, random data and
// the extremes (−128 everywhere, a long K, where a lane's sum of shifted
// products is largest).
func TestDotI8PathsAgree(t *testing.T) {
	if !qgemm.Available {
		t.Skip("no AVX-512 VNNI on this CPU (or -tags purego): the Go loop is the only path")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	cases := []struct {
		m, n, k int
		fill    func() int8
	}{
		{1, 4, 4, nil}, {4, 4, 64, nil}, {5, 7, 68, nil}, {9, 13, 132, nil}, {4, 8, 1020, nil}, {13, 17, 776, nil},
		{6, 6, 4096, func() int8 { return -128 }},
		{5, 9, 2048, func() int8 { return 127 }},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("m=%d/n=%d/k=%d", c.m, c.n, c.k), func(t *testing.T) {
			a, b := make([]int8, c.m*c.k), make([]int8, c.n*c.k)
			for _, s := range [][]int8{a, b} {
				for i := range s {
					if c.fill != nil {
						s[i] = c.fill()
					} else {
						s[i] = int8(rng.IntN(256) - 128)
					}
				}
			}
			got := make([]int32, c.m*c.n)
			dotI8(got, a, b, c.m, c.n, c.k)
			want := make([]int32, c.m*c.n)
			qgemm.Available = false
			defer func() { qgemm.Available = true }()
			dotI8(want, a, b, c.m, c.n, c.k)
			require.Equal(t, want, got)
		})
	}
}
