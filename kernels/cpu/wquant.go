package cpu

import (
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/cpu/internal/qgemm"
	"github.com/zbench/zbench/kernels/cpu/internal/sgemmasm"
)

var _ kernels.WeightQuant = (*Backend)(nil)

// wgemvRows is the most rows of x WMatMul takes one dot product per
// output at (decode, and a serving engine's batches of sequences, four
// rows at a time against each weight row where the format has a Dot4
// kernel); more rows dequantize blocks of the weight to float32 and
// multiply them with the SGEMM (prefill), which reads each weight once
// instead of once per row.
const wgemvRows = 16

// wblock is the number of weight rows a worker dequantizes at a time on
// the SGEMM path.
const wblock = 64

// WMatMul multiplies x by the transpose of a weight-only quantized matrix,
// dequantizing it on the fly: per output a dot product of x's row with the
// codes (AVX-512 where the CPU has it) for a few rows of x, or blocks of
// the weight dequantized to float32 and the SGEMM for more.
func (b *Backend) WMatMul(out, x *kernels.Tensor, w kernels.QWeight, bias *kernels.Tensor) error {
	g, err := check.WMatMul("cpu: wmatmul", b, out, x, w, bias)
	if err != nil {
		return err
	}
	xs := make([]float32, g.M*g.K)
	copy(xs, loadRange(x, 0, g.M*g.K, xs))
	var bv []float32
	if bias != nil {
		bv = f32(bias)
	}
	y, flush := out32(out, false)
	if g.M <= wgemvRows {
		wgemv(y, xs, w, g)
	} else {
		wgemm(y, xs, w, g)
	}
	if bv != nil {
		for m := range g.M {
			row := y[m*g.N : (m+1)*g.N]
			for j := range row {
				row[j] += bv[j]
			}
		}
	}
	flush()
	return nil
}

// wgemv sets y [M, N] = x [M, K] · Wᵀ with one dot product per output,
// through dotRows over wrowDots.
func wgemv(y, xs []float32, w kernels.QWeight, g check.WMatMulDims) {
	// The 4-bit formats' whole chunks of 128 go through DotQ4L where the
	// groups allow it, the rest through DotQ4.
	var walk qgemm.ScaleWalk
	k128 := 0
	if w.Format != kernels.WInt8 {
		var ok bool
		if walk, ok = qgemm.NewScaleWalk(f32(w.Scales), w.Group); ok && qgemm.Available {
			k128 = g.K &^ (qgemm.Chunk4 - 1)
		}
		for m := range g.M {
			x := xs[m*g.K : (m+1)*g.K]
			qgemm.LaneOrder4(x[:k128])
			permuteQ4(x[k128:])
		}
	}
	rowBytes := w.Data.Len() / g.N
	dotRows(y, xs, g.M, g.N, g.K, 1, 0, rowBytes, func() rowKernels[float32] { return wrowDots(w, g.K, walk, k128) })
}

// wrowDots returns the rowKernels over a weight-only quantized W [N, K]
// (k = K) for one goroutine, x's rows ordered as wgemv leaves them: a
// rowDot4 where a Dot4 kernel takes the format (int8 per channel, or in
// groups of 32 with K a multiple of 128), and a rowDotN for int8 in
// groups, per channel with K a multiple of 16, and the 4-bit formats
// where DotQ4L takes all of K.
func wrowDots(w kernels.QWeight, k int, walk qgemm.ScaleWalk, k128 int) rowKernels[float32] {
	data, scales := i8(w.Data), f32(w.Scales)
	switch {
	case w.Format == kernels.WInt8 && w.Group == 0:
		k16 := 0
		if qgemm.Available {
			k16 = k &^ 15
		}
		dot := func(x []float32, j int) float32 { return dotQ8(x, data[j*k:(j+1)*k]) * scales[j] }
		if k16 == 0 {
			return rowKernels[float32]{one: dot}
		}
		kern := rowKernels[float32]{one: dot, four: func(x []float32, j, pre int, sums *[4]float32) {
			_, _, _ = data[j*k+k-1], data[pre*k+k-1], x[4*k-1]
			qgemm.Dot4Q8(&x[0], k, &data[j*k], k16, &sums[0], 1, &data[pre*k])
			wr := data[j*k : (j+1)*k]
			for r := range sums {
				sums[r] = q8Tail(sums[r], x[r*k:(r+1)*k], wr, k16) * scales[j]
			}
		}}
		if k16 == k {
			kern.rows = func(x []float32, j0, j1 int, dst []float32) {
				_, _, _, _ = data[j1*k-1], scales[j1-1], dst[j1-j0-1], x[k-1]
				qgemm.DotQ8Rows(&x[0], &data[j0*k], k, j1-j0, &scales[j0], &dst[0])
			}
		}
		return kern
	case w.Format == kernels.WInt8 && w.Scales.DType() == kernels.F16:
		return wrowDotsQ8H(data, u16(w.Scales), k, w.Group)
	case w.Format == kernels.WInt8:
		ng := k / w.Group
		dot := func(x []float32, j int) float32 {
			return dotQ8G(x, data[j*k:(j+1)*k], scales[j*ng:(j+1)*ng], w.Group)
		}
		if !qgemm.Available {
			return rowKernels[float32]{one: dot}
		}
		kern := rowKernels[float32]{one: dot, rows: func(x []float32, j0, j1 int, dst []float32) {
			_, _, _, _ = data[j1*k-1], scales[j1*ng-1], dst[j1-j0-1], x[k-1]
			qgemm.DotQ8GRows(&x[0], &data[j0*k], k, j1-j0, &scales[j0*ng], w.Group, &dst[0])
		}}
		if w.Group == 32 && k%128 == 0 {
			kern.four = func(x []float32, j, pre int, sums *[4]float32) {
				_, _, _, _ = data[j*k+k-1], data[pre*k+k-1], x[4*k-1], scales[(j+1)*ng-1]
				qgemm.Dot4Q8G32(&x[0], k, &data[j*k], k, &sums[0], 1, &data[pre*k], &scales[j*ng])
			}
		}
		return kern
	}
	levels := w.Format.Levels()
	ng := k / w.Group
	kern := rowKernels[float32]{one: func(x []float32, j int) float32 {
		row, rs := data[j*k/2:(j+1)*k/2], scales[j*ng:(j+1)*ng]
		var s float32
		if k128 > 0 {
			walk.P = &rs[0]
			s = qgemm.DotQ4L(&x[0], &row[0], k128, &walk, &levels)
		}
		if k128 < k {
			s += dotQ4(x[k128:], row[k128/2:], rs[k128/w.Group:], w.Group, &levels)
		}
		return s
	}}
	if k128 == k && k > 0 {
		kern.rows = func(x []float32, j0, j1 int, dst []float32) {
			_, _, _, _ = data[j1*k/2-1], scales[j1*ng-1], dst[j1-j0-1], x[k-1]
			walk.P = &scales[j0*ng]
			qgemm.DotQ4LRows(&x[0], &data[j0*k/2], k, j1-j0, &walk, &levels, &dst[0])
		}
	}
	return kern
}

// wrowDotsQ8H is wrowDots for int8 codes data [N, k] in groups of group
// with float16 scales: the kernels over float16 scales where the CPU has
// them, else dotQ8G over each row's scales widened.
func wrowDotsQ8H(data []int8, scales []uint16, k, group int) rowKernels[float32] {
	ng := k / group
	if !qgemm.Available {
		buf := make([]float32, 0, ng) // a row's scales widened, one goroutine's
		return rowKernels[float32]{one: func(x []float32, j int) float32 {
			return dotQ8G(x, data[j*k:(j+1)*k], widenF16(buf[:0], scales[j*ng:(j+1)*ng]), group)
		}}
	}
	rows := func(x []float32, j0, j1 int, dst []float32) {
		_, _, _, _ = data[j1*k-1], scales[j1*ng-1], dst[j1-j0-1], x[k-1]
		qgemm.DotQ8GRowsH(&x[0], &data[j0*k], k, j1-j0, &scales[j0*ng], group, &dst[0])
	}
	kern := rowKernels[float32]{rows: rows, one: func(x []float32, j int) float32 {
		var d [1]float32
		rows(x, j, j+1, d[:])
		return d[0]
	}}
	if group == 32 && k%128 == 0 {
		kern.four = func(x []float32, j, pre int, sums *[4]float32) {
			_, _, _, _ = data[j*k+k-1], data[pre*k+k-1], x[4*k-1], scales[(j+1)*ng-1]
			qgemm.Dot4Q8G32H(&x[0], k, &data[j*k], k, &sums[0], 1, &data[pre*k], &scales[j*ng])
		}
	}
	return kern
}

// widenF16 appends the float16 values h, widened exactly, to dst.
func widenF16(dst []float32, h []uint16) []float32 {
	for _, v := range h {
		dst = append(dst, kernels.F16ToFloat32(v))
	}
	return dst
}

// wgemm sets y [M, N] = x [M, K] · Wᵀ, each worker dequantizing wblock
// rows of W at a time as it packs them for the SGEMM (quantPanels). The
// 4-bit formats are dequantized in DotQ4's order (permuteQ4), and x's rows
// permuted alike, which leaves every dot product's terms the same.
func wgemm(y, xs []float32, w kernels.QWeight, g check.WMatMulDims) {
	if w.Format != kernels.WInt8 {
		for m := range g.M {
			permuteQ4(xs[m*g.K : (m+1)*g.K])
		}
	}
	blockedGemmT(y, xs, g.M, g.N, g.K, 1, 0, quantPanels(w, g.K))
}

// blockPanels gives blockedGemmT the panels of a block of a weight W [n,
// k]: for rows n0:n0+rows, gemmBlocked's packB of op(b) = Wᵀ over them,
// with buf (one goroutine's, grown as needed) as its scratch.
type blockPanels func(buf *[]float32, n0, rows int) func(dst []float32, pc, kc, jc, nc int) []float32

// widenedRows is the blockPanels of a weight W [n, k] that row(dst, r)
// widens to float32 a row at a time: the block's rows widened into buf,
// then packed.
func widenedRows(k int, row func(dst []float32, r int)) blockPanels {
	return func(buf *[]float32, n0, rows int) func(dst []float32, pc, kc, jc, nc int) []float32 {
		*buf = grow(*buf, rows*k)
		b := (*buf)[:rows*k]
		for r := range rows {
			row(b[r*k:(r+1)*k], n0+r)
		}
		return panelsOfB(b, k, true, sgemmMicro.nr)
	}
}

// quantPanels is the blockPanels of a weight-only quantized W [n, k] (int8
// codes with a scale per row or per group, float32 or float16 scales; the
// 4-bit formats in groups): each full 32-row panel of a k-block that starts
// a group (any, with a scale per row) and is a whole number of the
// assembly's chunks (16 int8 codes, 32 4-bit ones) is dequantized as it is
// packed (sgemmasm.PackQ8T32, PackQ4T32); for the rest, the block's rows
// are dequantized by dequantRow once and packed (as widenedRows does, all
// of it where the assembly does not run). Every value is dequantRow's. A
// block's scales are widened to float32 in one pass, then laid out per
// panel as the assembly reads them.
func quantPanels(w kernels.QWeight, k int) blockPanels {
	nr := sgemmMicro.nr // the panels' width; the assembly packs 32
	data := i8(w.Data)
	group, ng := k, 1
	if w.Group > 0 {
		group, ng = w.Group, k/w.Group
	}
	q8 := w.Format == kernels.WInt8
	chunk, rowBytes := 16, k
	if !q8 {
		chunk, rowBytes = 32, k/2
	}
	dequant := func(dst []float32, r int) { dequantRow(dst, w, r, k) }
	if !sgemmasm.Available512 || nr != 32 || group%chunk != 0 {
		return widenedRows(k, dequant)
	}
	levels := w.Format.Levels()
	return func(buf *[]float32, n0, rows int) func(dst []float32, pc, kc, jc, nc int) []float32 {
		// buf: the block's scales [rows, ng], a panel's scale vectors, and
		// its rows dequantized, for the panels the assembly does not take.
		ns, nt := rows*ng, sgemmKC/16*nr
		*buf = grow(*buf, ns+nt+rows*k)
		scales, table, widened := (*buf)[:ns], (*buf)[ns:ns+nt], (*buf)[ns+nt:]
		if w.Scales.DType() == kernels.F16 {
			widen16(kernels.F16, scales, u16(w.Scales)[n0*ng:(n0+rows)*ng])
		} else {
			copy(scales, f32(w.Scales)[n0*ng:(n0+rows)*ng])
		}
		done := false // widened holds the block's rows
		return func(dst []float32, pc, kc, jc, nc int) []float32 {
			for jr := 0; jr < nc; jr += nr {
				r0, nn := jc+jr, min(nr, nc-jr) // rows of the block
				d := dst[jr*kc : (jr+nr)*kc]
				if nn == nr && kc%chunk == 0 && kc <= sgemmKC && (ng == 1 || pc%group == 0) {
					g0, g1, per := pc/group, (pc+kc+group-1)/group, group/chunk
					if ng == 1 {
						per = kc / chunk // one scale a row
					}
					for gi := g0; gi < g1; gi++ {
						t := table[(gi-g0)*nr : (gi-g0+1)*nr]
						for j := range t {
							t[j] = scales[(r0+j)*ng+gi]
						}
					}
					if q8 {
						src := data[(n0+r0)*k+pc:]
						_ = src[(nr-1)*k+kc-1]
						sgemmasm.PackQ8T32(&d[0], &src[0], k, kc, &table[0], per)
					} else {
						src := data[(n0+r0)*rowBytes+pc/2:]
						_ = src[(nr-1)*rowBytes+kc/2-1]
						sgemmasm.PackQ4T32(&d[0], &src[0], rowBytes, kc, &table[0], per, &levels)
					}
					continue
				}
				if !done {
					for r := range rows {
						dequant(widened[r*k:(r+1)*k], n0+r)
					}
					done = true
				}
				packT(d, widened[r0*k+pc:], k, nn, kc, nr)
			}
			return dst
		}
	}
}

// blockedGemmT sets y [m, n] = alpha·x [m, k] · Wᵀ + beta·y for a weight
// W [n, k] that panels packs a block at a time (alpha ≠ 0, every
// dimension positive): each worker takes wblock rows of W at a time, whose
// float32 panels stay in cache, so that the float32 weight never exists
// whole; x, of more rows than a tile, is packed once for all the blocks
// (packAllA).
func blockedGemmT(y, xs []float32, m, n, k int, alpha, beta float32, panels blockPanels) {
	blocks := (n + wblock - 1) / wblock
	kern := sgemmMicro
	panelsA := panelsOfA(xs, k, false, kern.mr)
	if m > kern.mr {
		buf := scratch32.Get().(*[]float32)
		defer scratch32.Put(buf)
		panelsA = packAllA(buf, kern, xs, k, m, k).panels
	}
	parallelFor(blocks, m*wblock*k/16, func(lo, hi int) {
		wb := scratch32.Get().(*[]float32)
		defer scratch32.Put(wb)
		for blk := lo; blk < hi; blk++ {
			n0 := blk * wblock
			rows := min(wblock, n-n0)
			sgemmPanels(kern, m, rows, k, alpha, beta, y[n0:], n, panelsA, panels(wb, n0, rows))
		}
	})
}

// dequantRow sets dst (K values) to row n of W dequantized, the 4-bit
// formats in DotQ4's order (see wgemm).
func dequantRow(dst []float32, w kernels.QWeight, n, k int) {
	data := i8(w.Data)
	if w.Format == kernels.WInt8 {
		group, ng := k, 1 // one scale per row is one group of k
		if w.Group > 0 {
			group, ng = w.Group, k/w.Group
		}
		var s32 []float32
		var s16 []uint16
		if w.Scales.DType() == kernels.F16 {
			s16 = u16(w.Scales)[n*ng : (n+1)*ng]
		} else {
			s32 = f32(w.Scales)[n*ng : (n+1)*ng]
		}
		row := data[n*k : (n+1)*k]
		for gi := range ng {
			var s float32
			if s16 != nil {
				s = kernels.F16ToFloat32(s16[gi])
			} else {
				s = s32[gi]
			}
			lo, hi := gi*group, (gi+1)*group
			k16 := lo
			if qgemm.Available {
				if k16 = lo + group&^15; k16 > lo {
					qgemm.DequantQ8(&dst[lo], &row[lo], k16-lo, s)
				}
			}
			for i := k16; i < hi; i++ {
				dst[i] = float32(row[i]) * s
			}
		}
		return
	}
	levels := w.Format.Levels()
	ng := k / w.Group
	row, rs := data[n*k/2:(n+1)*k/2], f32(w.Scales)[n*ng:(n+1)*ng]
	if qgemm.Available {
		qgemm.DequantQ4(&dst[0], &row[0], k, &rs[0], w.Group, &levels)
		return
	}
	for c := 0; c < k; c += 32 {
		s := rs[c/w.Group]
		for i, b := range row[c/2 : c/2+16] {
			dst[c+i] = levels[uint8(b)&15] * s
			dst[c+16+i] = levels[uint8(b)>>4] * s
		}
	}
}

// permuteQ4 reorders x in place, chunk of 32 by chunk of 32, into the 16
// values at even positions followed by the 16 at odd ones: the order in
// which DotQ4 meets the low and high nibbles of 16 bytes.
func permuteQ4(x []float32) {
	var t [32]float32
	for c := 0; c+32 <= len(x); c += 32 {
		for i := range 16 {
			t[i], t[16+i] = x[c+2*i], x[c+2*i+1]
		}
		copy(x[c:c+32], t[:])
	}
}

// dotQ8 is Σ x[p]·w[p] over int8 codes.
func dotQ8(x []float32, w []int8) float32 {
	w = w[:len(x)]
	var s float32
	k16 := 0
	if qgemm.Available {
		k16 = len(x) &^ 15
		if k16 > 0 {
			s = qgemm.DotQ8(&x[0], &w[0], k16)
		}
	}
	return q8Tail(s, x, w, k16)
}

// q8Tail adds x[p]·w[p] for p from from on to s, one term at a time.
func q8Tail(s float32, x []float32, w []int8, from int) float32 {
	for p := from; p < len(x); p++ {
		s += x[p] * float32(w[p])
	}
	return s
}

// dotQ8G is Σ over groups of scale·Σ x[p]·w[p] for int8 codes in groups
// of group values (a multiple of 32).
func dotQ8G(x []float32, w []int8, scales []float32, group int) float32 {
	if qgemm.Available {
		_, _ = w[len(x)-1], scales[len(x)/group-1]
		return qgemm.DotQ8G(&x[0], &w[0], len(x), &scales[0], group)
	}
	var total float32
	for g := range len(x) / group {
		var part float32
		for p := g * group; p < (g+1)*group; p++ {
			part += x[p] * float32(w[p])
		}
		total += part * scales[g]
	}
	return total
}

// dotQ4 is Σ over groups of scale·Σ x'·levels[code] for 4-bit codes, x
// permuted by permuteQ4.
func dotQ4(x []float32, w []int8, scales []float32, group int, levels *[16]float32) float32 {
	if qgemm.Available {
		_, _ = w[len(x)/2-1], scales[len(x)/group-1]
		return qgemm.DotQ4(&x[0], &w[0], len(x), &scales[0], group, levels)
	}
	var total float32
	for g := 0; g < len(x)/group; g++ {
		var part float32
		for c := g * group; c < (g+1)*group; c += 32 {
			for i := range 16 {
				b := uint8(w[c/2+i])
				part += x[c+i]*levels[b&15] + x[c+16+i]*levels[b>>4]
			}
		}
		total += part * scales[g]
	}
	return total
}
