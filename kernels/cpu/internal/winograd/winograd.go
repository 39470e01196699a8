// Package winograd holds Winograd's minimal filtering F(2×2, 3×3) for
// package cpu's 3×3 convolutions: a 4×4 tile of input pixels and a 3×3
// filter give a 2×2 tile of outputs from 16 products instead of 36. The
// filter transform is in Go; the input and output transforms of a tile,
// over 16 channels at a time, are in AVX-512, with Go references.
package winograd

// Filter sets u[ξ·co·ci + o·ci + c], ξ = 4i+j < 16, to (G g Gᵀ)[i][j] for
// the 3×3 filter g[kh][kw] = w[((o·3+kh)·3+kw)·ci + c] of output channel o
// and input channel c: w holds co filters [3, 3, ci], and u is 16 matrices
// [co, ci], one per position ξ of the transformed tile.
func Filter(u, w []float32, co, ci int) {
	_, _ = u[16*co*ci-1], w[9*co*ci-1]
	for o := range co {
		for c := range ci {
			var g [3][3]float32
			for kh := range 3 {
				for kw := range 3 {
					g[kh][kw] = w[((o*3+kh)*3+kw)*ci+c]
				}
			}
			// t = G g: rows g0, (g0+g1+g2)/2, (g0−g1+g2)/2, g2.
			var t [4][3]float32
			for kw := range 3 {
				g0, g1, g2 := g[0][kw], g[1][kw], g[2][kw]
				t[0][kw], t[1][kw], t[2][kw], t[3][kw] = g0, (g0+g1+g2)/2, (g0-g1+g2)/2, g2
			}
			for i := range 4 {
				t0, t1, t2 := t[i][0], t[i][1], t[i][2]
				for j, v := range [4]float32{t0, (t0 + t1 + t2) / 2, (t0 - t1 + t2) / 2, t2} {
					u[(4*i+j)*co*ci+o*ci+c] = v
				}
			}
		}
	}
}

// InputRef is Input in Go, the same additions in the same order: v[(4i+j)·vs
// + c] = (Bᵀ d B)[i][j] for the tile d[i][j] = x[i·rs + j·cs + c], c < n.
func InputRef(n int, x []float32, rs, cs int, v []float32, vs int) {
	for c := range n {
		var d, e [4][4]float32
		for i := range 4 {
			for j := range 4 {
				d[i][j] = x[i*rs+j*cs+c]
			}
		}
		for j := range 4 {
			e[0][j], e[1][j], e[2][j], e[3][j] = d[0][j]-d[2][j], d[1][j]+d[2][j], d[2][j]-d[1][j], d[1][j]-d[3][j]
		}
		for i := range 4 {
			r := e[i]
			for j, t := range [4]float32{r[0] - r[2], r[1] + r[2], r[2] - r[1], r[1] - r[3]} {
				v[(4*i+j)*vs+c] = t
			}
		}
	}
}

// OutputRef is Output in Go, the same additions in the same order: y[a·rs +
// b·cs + c] = max(floor, (Aᵀ m A)[a][b] + bias[c] + r[a·rs + b·cs + c]) for
// the tile m[i][j] = m[(4i+j)·ms + c], c < n, bias and r left out where
// nil, and y where it is NaN.
func OutputRef(n int, m []float32, ms int, y []float32, rs, cs int, r, bias []float32, floor float32) {
	for c := range n {
		var s [2][4]float32
		for j := range 4 {
			m0, m1, m2, m3 := m[j*ms+c], m[(4+j)*ms+c], m[(8+j)*ms+c], m[(12+j)*ms+c]
			s[0][j], s[1][j] = m0+m1+m2, m1-m2-m3
		}
		for a := range 2 {
			row := s[a]
			for b, v := range [2]float32{row[0] + row[1] + row[2], row[1] - row[2] - row[3]} {
				if bias != nil {
					v += bias[c]
				}
				at := a*rs + b*cs + c
				if r != nil {
					v += r[at]
				}
				if floor > v {
					v = floor
				}
				y[at] = v
			}
		}
	}
}
