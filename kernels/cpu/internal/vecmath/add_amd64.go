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

// MaxWindows sets dst[j·c+i], for j < n and i < c, to the maximum of
// src[j·step+t·tapStep+i] over t < taps, as MaxOf gives it: the rows of
// a pooling window's taps, c values each, step and tapStep values apart.
// taps must be at least 1, and dst must not overlap src.
func MaxWindows(dst, src []float32, c, n, step, taps, tapStep int) {
	if n <= 0 || c <= 0 {
		return
	}
	_ = dst[n*c-1]
	_ = src[(n-1)*step+(taps-1)*tapStep+c-1]
	if !AVX512 || c%16 != 0 || taps < 1 {
		maxWindows(dst, src, c, n, step, taps, tapStep)
		return
	}
	maxWindowsAVX512(&dst[0], &src[0], c, n, step, taps, tapStep)
}

// maxWindowsAVX512 is MaxWindows for c a multiple of 16, n and taps at
// least 1, the bounds checked.
//
//go:noescape
func maxWindowsAVX512(dst, src *float32, c, n, step, taps, tapStep int)

// maxOfAVX512 sets dst[i] = max(a[i], b[i]) for i < n, n ≥ 1.
//
//go:noescape
func maxOfAVX512(dst, a, b *float32, n int)

// maxOfAVX2 is maxOfAVX512 with AVX2.
//
//go:noescape
func maxOfAVX2(dst, a, b *float32, n int)

// maxWindows is MaxWindows one window at a time through MaxOf.
func maxWindows(dst, src []float32, c, n, step, taps, tapStep int) {
	for j := range n {
		px := dst[j*c : (j+1)*c]
		copy(px, src[j*step:j*step+c])
		for t := 1; t < taps; t++ {
			o := j*step + t*tapStep
			MaxOf(px, px, src[o:o+c])
		}
	}
}
