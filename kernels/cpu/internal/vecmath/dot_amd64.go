//go:build amd64 && !purego

package vecmath

// DotBF16Available reports whether DotBF16 runs here: AVX-512.
var DotBF16Available = AVX512

// DotBF16 returns Σ a[i]·w[i] over the bfloat16 values w, widened exactly
// to float32, summed in float32 over 64 lanes; a must be at least as long
// as w.
func DotBF16(a []float32, w []uint16) float32 {
	if len(w) == 0 {
		return 0
	}
	a = a[:len(w)]
	return dotBF16AVX512(&a[0], &w[0], len(w))
}

// dotBF16AVX512 is DotBF16 over n values, n ≥ 1.
//
//go:noescape
func dotBF16AVX512(a *float32, w *uint16, n int) float32
