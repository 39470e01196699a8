//go:build amd64 && !purego

package vecmath

// Add sets dst[i] = a[i] + b[i] for i < len(dst), rounded once as Go's
// float32 addition; a and b must be at least as long as dst, and dst may
// be a or b.
func Add(dst, a, b []float32) {
	if len(dst) > 0 {
		a, b = a[:len(dst)], b[:len(dst)]
		if AVX512 {
			addAVX512(&dst[0], &a[0], &b[0], len(dst))
			return
		}
		addAVX2(&dst[0], &a[0], &b[0], len(dst))
	}
}

// addAVX512 sets dst[i] = a[i] + b[i] for i < n, n ≥ 1.
//
//go:noescape
func addAVX512(dst, a, b *float32, n int)

// addAVX2 is addAVX512 with AVX2.
//
//go:noescape
func addAVX2(dst, a, b *float32, n int)

// MaxOf sets dst[i] = max(a[i], b[i]) as Go's max gives it: NaN where
// either is NaN, +0 for +0 and −0; a and b must be at least as long as
// dst, and dst may be a or b.
func MaxOf(dst, a, b []float32) {
	if len(dst) > 0 {
		a, b = a[:len(dst)], b[:len(dst)]
		if AVX512 {
			maxOfAVX512(&dst[0], &a[0], &b[0], len(dst))
			return
		}
		maxOfAVX2(&dst[0], &a[0], &b[0], len(dst))
	}
}

// maxOfAVX512 sets dst[i] = max(a[i], b[i]) for i < n, n ≥ 1.
//
//go:noescape
func maxOfAVX512(dst, a, b *float32, n int)

// maxOfAVX2 is maxOfAVX512 with AVX2.
//
//go:noescape
func maxOfAVX2(dst, a, b *float32, n int)
