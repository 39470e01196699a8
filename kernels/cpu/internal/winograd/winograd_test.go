package winograd

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTileIsCorrelation checks the three transforms together against
// the 3×3 correlation they stand for: Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A over
// random tiles and filters of several channels equals the 2×2 outputs
// summed directly in float64, to float32's rounding.
func TestTileIsCorrelation(t *testing.T) {
	const co, ci = 3, 5
	r := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, co*9*ci)
	for i := range w {
		w[i] = r.Float32()*2 - 1
	}
	x := make([]float32, 16*ci) // [4][4][ci]
	for i := range x {
		x[i] = r.Float32()*2 - 1
	}
	u := make([]float32, 16*co*ci)
	Filter(u, w, co, ci)
	v := make([]float32, 16*ci)
	InputRef(ci, x, 4*ci, ci, v, ci)
	m := make([]float32, 16*co) // [16][co]: Σ over channels of u ⊙ v
	for xi := range 16 {
		for o := range co {
			var s float32
			for c := range ci {
				s += u[xi*co*ci+o*ci+c] * v[xi*ci+c]
			}
			m[xi*co+o] = s
		}
	}
	y := make([]float32, 4*co) // [2][2][co]
	OutputRef(co, m, co, y, 2*co, co, nil, nil, float32(math.Inf(-1)))
	for a := range 2 {
		for b := range 2 {
			for o := range co {
				var want float64
				for kh := range 3 {
					for kw := range 3 {
						for c := range ci {
							want += float64(w[((o*3+kh)*3+kw)*ci+c]) * float64(x[((a+kh)*4+b+kw)*ci+c])
						}
					}
				}
				require.InDelta(t, want, y[(a*2+b)*co+o], 1e-5, "output (%d, %d) of filter %d", a, b, o)
			}
		}
	}
}

// TestOutputRefEpilogue checks the bias, the residual and the floor of
// OutputRef, a NaN kept through a floor of 0.
func TestOutputRefEpilogue(t *testing.T) {
	m := make([]float32, 16) // one channel, m[0][0] = 2: every output but (1, *) is 2
	m[0] = 2
	y := make([]float32, 4)
	r := []float32{1, float32(math.NaN()), -10, 0}
	OutputRef(1, m, 1, y, 2, 1, r, []float32{0.5}, 0)
	require.Equal(t, float32(3.5), y[0])
	require.True(t, math.IsNaN(float64(y[1])), "the NaN residual's output: %v", y[1])
	require.Equal(t, []float32{0, 0.5}, y[2:], "the floor, then bias alone")
}
