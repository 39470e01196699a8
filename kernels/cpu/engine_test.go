package cpu

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/zbench/zbench/kernels"
)

func TestChooseEngine(t *testing.T) {
	missing := []string{"libzbench-no-such-lib.so"}
	installed := engineLibs{openblas: openBLASNames, onednn: oneDNNNames}
	none := engineLibs{openblas: missing, onednn: missing}
	onlyOpenBLAS := engineLibs{openblas: openBLASNames, onednn: missing}
	own := ownBF16()
	pureName := goBLASName
	if own != nil {
		pureName += "+" + ownBF16Name
	}
	for _, tc := range []struct {
		want          string
		libs          engineLibs
		ownFirst, amx bool
		name          string
		err           string
	}{
		{"purego", installed, false, false, "purego", ""},
		{" purego ", installed, false, true, "purego", ""},
		{"", none, false, false, "purego", ""}, // auto: pure Go where nothing is installed
		{"auto", none, false, false, "purego", ""},
		{"auto", onlyOpenBLAS, true, false, "purego", ""}, // our SGEMM is the faster here
		{"openblas", none, true, false, "", "ZBENCH_CPU_ENGINE=openblas: "},
		{"onednn", none, true, false, "", "ZBENCH_CPU_ENGINE=onednn: oneDNN cannot be loaded"},
		{"mkl", installed, false, false, "", `ZBENCH_CPU_ENGINE="mkl": want one of purego, openblas, onednn`},
	} {
		t.Run(fmt.Sprintf("%q/own-first=%v/amx=%v", tc.want, tc.ownFirst, tc.amx), func(t *testing.T) {
			c := chooseEngine(tc.want, tc.libs, tc.ownFirst, tc.amx)
			if tc.err != "" {
				require.ErrorIs(t, c.err, ErrEngine)
				assert.ErrorContains(t, c.err, tc.err)
				assert.Nil(t, c.impl)
				return
			}
			require.NoError(t, c.err)
			if tc.want == "auto" && tc.ownFirst && own != nil {
				tc.name = "auto"
			}
			assert.Equal(t, tc.name, c.name)
			assert.Equal(t, pureName, c.blas)
			assert.Equal(t, goBLASImpl{}, c.impl)
			assert.Equal(t, own != nil, isOwnBF16(c.bf16))
			if own == nil {
				assert.Nil(t, c.bf16)
			}
		})
	}
	// Where a library is installed, auto loads it: oneDNN for its
	// bfloat16 GEMM beside our SGEMM when ours is the faster and our
	// bfloat16 GEMM does not run or AMX does, for both otherwise; OpenBLAS
	// when oneDNN is missing and ours is the slower.
	if _, _, err := loadOneDNN(oneDNNNames); err == nil {
		c := chooseEngine("", installed, true, true)
		require.NoError(t, c.err)
		assert.Equal(t, "auto", c.name)
		assert.Equal(t, goBLASName+"+onednn-bf16", c.blas)
		assert.Equal(t, goBLASImpl{}, c.impl)
		assert.NotNil(t, c.bf16)
		assert.Contains(t, c.detail, "oneDNN ")
		c = chooseEngine("", installed, true, false)
		require.NoError(t, c.err)
		assert.Equal(t, "auto", c.name)
		if own != nil {
			assert.Equal(t, pureName, c.blas)
			assert.True(t, isOwnBF16(c.bf16))
		} else {
			assert.Equal(t, goBLASName+"+onednn-bf16", c.blas)
		}
		c = chooseEngine("", installed, false, false)
		require.NoError(t, c.err)
		assert.Equal(t, "onednn", c.name)
		assert.Equal(t, c.impl, c.bf16)
		c = chooseEngine("onednn", installed, true, false)
		require.NoError(t, c.err)
		assert.Equal(t, "onednn", c.name)
	}
	if _, _, err := loadOpenBLAS(openBLASNames); err == nil {
		c := chooseEngine("", onlyOpenBLAS, false, false)
		require.NoError(t, c.err)
		assert.Equal(t, "openblas", c.name)
		assert.NotEmpty(t, c.detail)
		assert.Nil(t, c.bf16)
	}
}

// TestEngineOpen opens the backend under this process's EngineEnv (make
// test runs it under each engine): the engine is chosen then, it is the one
// the backend reports and blas32 runs, and a forced engine that cannot be
// loaded, or an unknown name, is the error of every open.
func TestEngineOpen(t *testing.T) {
	want := strings.TrimSpace(os.Getenv(EngineEnv))
	be, err := kernels.Open("cpu")
	e := engine()
	loads := map[string]func([]string) (blas.Float32, string, error){"openblas": loadOpenBLAS, "onednn": loadOneDNN}
	libs := map[string][]string{"openblas": openBLASNames, "onednn": oneDNNNames}
	if load, forced := loads[want]; forced && os.Getenv("ZBENCH_REQUIRE_ENGINES") == "" {
		if _, _, lerr := load(libs[want]); lerr != nil {
			require.ErrorIs(t, err, ErrEngine, "%s=%s where it cannot be loaded", EngineEnv, want)
			assert.ErrorContains(t, err, EngineEnv+"="+want+": ")
			return
		}
	}
	if want != "" && want != "auto" && want != "purego" && loads[want] == nil {
		require.ErrorIs(t, err, ErrEngine, "%s=%q", EngineEnv, want)
		assert.Equal(t, e.err, errors.Unwrap(err))
		_, again := kernels.Open("cpu")
		assert.ErrorIs(t, again, ErrEngine, "every open fails")
		assert.PanicsWithError(t, e.err.Error(), func() { New() })
		return
	}
	require.NoError(t, err)
	require.NoError(t, e.err)
	if want != "" && want != "auto" {
		assert.Equal(t, want, e.name)
	}
	assert.Equal(t, e.blas, be.Info().BLAS)
	assert.Equal(t, e.detail, be.Info().Driver)
	assert.Equal(t, e.impl, blas32.Implementation(), "blas32 runs the engine")
	if bf16 := be.(*Backend).bf16; e.bf16 == nil {
		assert.Nil(t, bf16)
	} else {
		assert.IsType(t, e.bf16, bf16, "matrix products run the engine's bfloat16 GEMM")
	}
}

// requireLib returns a loaded engine's implementation; where make test
// has installed the libraries (ZBENCH_REQUIRE_ENGINES=1) its absence is a
// failure.
func requireLib(t *testing.T, load func([]string) (blas.Float32, string, error), names []string) blas.Float32 {
	impl, detail, err := load(names)
	if err != nil && os.Getenv("ZBENCH_REQUIRE_ENGINES") == "" {
		t.Skipf("%v (make test installs it and requires it)", err)
	}
	require.NoError(t, err)
	t.Logf("%s", detail)
	return impl
}

// isOwnBF16 reports whether g is our bfloat16 GEMM on the assembly kernel.
func isOwnBF16(g bf16Gemmer) bool {
	o, ok := g.(bf16Gemm)
	return ok && o.kern.name == asmBF16Kernel.name
}

// TestLibSgemm checks the loaded engines' SGEMM against gonum's over every
// transpose, padded strides, alpha and beta, and the calls they leave to
// gonum (degenerate sizes, arguments that do not fit their slices).
func TestLibSgemm(t *testing.T) {
	for _, lib := range []struct {
		name  string
		load  func([]string) (blas.Float32, string, error)
		names []string
	}{{"openblas", loadOpenBLAS, openBLASNames}, {"onednn", loadOneDNN, oneDNNNames}} {
		t.Run(lib.name, func(t *testing.T) { testSgemm(t, requireLib(t, lib.load, lib.names)) })
	}
}

// testSgemm checks impl's SGEMM against gonum's.
func testSgemm(t *testing.T, impl blas.Float32) {
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
				// The bfloat16 GEMM (the engine's own, and the float32
				// one through which the others widen) against gonum's
				// SGEMM of the widened values: the products are exact, so
				// only the order of the sums differs.
				a16, aw := toBF16(a)
				b16, bw := toBF16(b)
				c16 := fill(tc.m * ldc)
				want = append(want[:0], c16...)
				c16w := append([]float32(nil), c16...)
				ref.Sgemm(tA, tB, tc.m, tc.n, tc.k, tc.alpha, aw, lda, bw, ldb, tc.beta, want, ldc)
				widenedBf16gemm(tA, tB, tc.m, tc.n, tc.k, tc.alpha, a16, lda, b16, ldb, tc.beta, c16w, ldc)
				if bg, ok := impl.(bf16Gemmer); ok {
					bg.Bf16gemm(tA, tB, tc.m, tc.n, tc.k, tc.alpha, a16, lda, b16, ldb, tc.beta, c16, ldc)
				} else {
					c16 = c16w
				}
				for i := range c {
					assert.InDelta(t, want[i], c16[i], 1e-4*float64(max(1, tc.k)), "bf16 %+v %c%c at %d", tc, tA, tB, i)
					assert.InDelta(t, want[i], c16w[i], 1e-4*float64(max(1, tc.k)), "widened bf16 %+v %c%c at %d", tc, tA, tB, i)
				}
			}
		}
	}
	// Arguments that do not fit are gonum's panic, not a read out of bounds.
	assert.Panics(t, func() {
		impl.Sgemm(blas.NoTrans, blas.NoTrans, 4, 4, 4, 1, make([]float32, 15), 4, make([]float32, 16), 4, 0, make([]float32, 16), 4)
	})
	if bg, ok := impl.(bf16Gemmer); ok {
		assert.Panics(t, func() {
			bg.Bf16gemm(blas.NoTrans, blas.NoTrans, 4, 4, 4, 1, make([]uint16, 15), 4, make([]uint16, 16), 4, 0, make([]float32, 16), 4)
		})
	}
}

// toBF16 rounds s to bfloat16 and returns it as stored and widened.
func toBF16(s []float32) ([]uint16, []float32) {
	h, w := make([]uint16, len(s)), make([]float32, len(s))
	for i, v := range s {
		h[i] = kernels.BF16FromFloat32(v)
		w[i] = kernels.BF16ToFloat32(h[i])
	}
	return h, w
}
