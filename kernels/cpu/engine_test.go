package cpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

func TestChooseEngine(t *testing.T) {
	missing := []string{"libzbench-no-such-blas.so"}
	for _, tc := range []struct {
		want     string
		names    []string
		ownFirst bool
		name     string
		err      string
	}{
		{"purego", openBLASNames, false, "purego", ""},
		{" purego ", openBLASNames, false, "purego", ""},
		{"", missing, false, "purego", ""}, // auto: pure Go where OpenBLAS is not installed
		{"auto", missing, false, "purego", ""},
		{"auto", openBLASNames, true, "purego", ""}, // our SGEMM is the faster here
		{"openblas", missing, true, "", "ZBENCH_CPU_ENGINE=openblas: "},
		{"mkl", openBLASNames, false, "", `ZBENCH_CPU_ENGINE="mkl": want one of purego, openblas`},
	} {
		t.Run(fmt.Sprintf("%q/own-first=%v", tc.want, tc.ownFirst), func(t *testing.T) {
			c := chooseEngine(tc.want, tc.names, tc.ownFirst)
			if tc.err != "" {
				require.ErrorIs(t, c.err, ErrEngine)
				assert.ErrorContains(t, c.err, tc.err)
				assert.Nil(t, c.impl)
				return
			}
			require.NoError(t, c.err)
			assert.Equal(t, tc.name, c.name)
			assert.Equal(t, goBLASName, c.blas)
			assert.Equal(t, goBLASImpl{}, c.impl)
		})
	}
	// Where OpenBLAS is installed and our SGEMM is not the faster, auto
	// loads it.
	if _, _, err := loadOpenBLAS(openBLASNames); err == nil {
		c := chooseEngine("", openBLASNames, false)
		require.NoError(t, c.err)
		assert.Equal(t, "openblas", c.name)
		assert.NotEmpty(t, c.detail)
	}
}

// requireOpenBLAS returns OpenBLAS's implementation; where make test has
// installed it (ZBENCH_REQUIRE_OPENBLAS=1) its absence is a failure.
func requireOpenBLAS(t *testing.T) blas.Float32 {
	impl, detail, err := loadOpenBLAS(openBLASNames)
	if err != nil && os.Getenv("ZBENCH_REQUIRE_OPENBLAS") == "" {
		t.Skipf("%v (make test installs it and requires it)", err)
	}
	require.NoError(t, err)
	t.Logf("OpenBLAS: %s", detail)
	return impl
}

// TestOpenBLASSgemm checks OpenBLAS's SGEMM against gonum's over every
// transpose, padded strides, alpha and beta, and the calls it leaves to
// gonum (degenerate sizes, arguments that do not fit their slices).
func TestOpenBLASSgemm(t *testing.T) {
	impl := requireOpenBLAS(t)
	var ref gonum.Implementation
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(2*r.Float64() - 1)
		}
		return s
	}
	for _, tc := range []struct {
		m, n, k, pad int
		alpha, beta  float32
	}{
		{1, 1, 1, 0, 1, 0}, {7, 5, 3, 2, 2, 1}, {64, 48, 96, 0, 1, 0.5}, {130, 67, 257, 3, -1, 0},
		{3, 4, 0, 0, 1, 0.5}, {3, 4, 5, 0, 0, 2},
	} {
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				ar, ac := tc.m, tc.k
				if tA == blas.Trans {
					ar, ac = tc.k, tc.m
				}
				br, bc := tc.k, tc.n
				if tB == blas.Trans {
					br, bc = tc.n, tc.k
				}
				lda, ldb, ldc := max(1, ac+tc.pad), max(1, bc+tc.pad), tc.n+tc.pad
				a, b, c := fill(max(1, ar*lda)), fill(max(1, br*ldb)), fill(tc.m*ldc)
				want := append([]float32(nil), c...)
				ref.Sgemm(tA, tB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, want, ldc)
				impl.Sgemm(tA, tB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
				for i := range c {
					assert.InDelta(t, want[i], c[i], 1e-4*float64(max(1, tc.k)), "%+v %c%c at %d", tc, tA, tB, i)
				}
			}
		}
	}
	// Arguments that do not fit are gonum's panic, not a read out of bounds.
	assert.Panics(t, func() {
		impl.Sgemm(blas.NoTrans, blas.NoTrans, 4, 4, 4, 1, make([]float32, 15), 4, make([]float32, 16), 4, 0, make([]float32, 16), 4)
	})
}
