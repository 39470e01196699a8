package cpu

import (
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/zbench/zbench/kernels/cpu/internal/sgemmasm"
)

// goBLASName is the BLAS of the purego engine, as DeviceInfo.BLAS names
// it: gonum's implementation with our own SGEMM.
const goBLASName = "zbench-sgemm"

// goBLASImpl is gonum's BLAS with a blocked, vectorised SGEMM of our own
// in place of gonum's.
type goBLASImpl struct{ gonum.Implementation }

// Blocking of the SGEMM (GotoBLAS / BLIS): a kc-deep slice of op(b),
// sgemmNC columns wide, is packed into nr-column panels, and an mc×kc
// block of op(a) into mr-row panels; the micro-kernel multiplies one
// panel of each into an mr×nr tile of c held in registers. The packed b
// panel (kc·nr) stays in L1, the packed a block (mc·kc) in L2.
const (
	sgemmKC = 256
	sgemmMC = 120  // a multiple of every kernel's mr
	sgemmNC = 4096 // a multiple of every kernel's nr
	// pfStep is how many elements of the following panel of b a
	// micro-kernel prefetches a step of k (a 64-byte line every four
	// steps): the tiles of a panel, each from its own offset, fetch the
	// next panel between them.
	pfStep = 4
	// sgemmSerial is the work (m·n·k) under which a product runs on the
	// calling goroutine.
	sgemmSerial = 64 * 64 * 64
)

// sgemmKernel is a micro-kernel: c[i*ldc+j] = alpha·Σp a[p*mr+i]·b[p*nr+j]
// + beta·c[i*ldc+j] over an mr×nr tile, for packed panels a (k·mr) and b
// (k·nr); beta 0 overwrites c without reading it. next is where in the
// following panel of b the kernel may prefetch from, a hint (possibly
// empty) that it is free to ignore. edge, where the kernel
// has one, is fn over only the first rows (a count it takes) of a's panel,
// for the last, partial panel of a product.
type sgemmKernel struct {
	mr, nr int
	name   string
	fn     func(k int, a, b, c []float32, ldc int, alpha, beta float32, next []float32)
	edge   edgeKernel[float32]
}

// edgeKernel is a micro-kernel over the first rows of an mr-row panel of
// a, rows being one of the counts edgeRows gives, into a rows×nr tile of c.
type edgeKernel[E float32 | uint32] func(rows, k int, a, b []E, c []float32, ldc int, alpha, beta float32)

// edgeRows is the row count of the edge kernel for the first of the
// rows left of a partial panel: 8 for more than 4 of them, else 4.
func edgeRows(left int) int {
	if left > 4 {
		return 8
	}
	return 4
}

// goKernel is the portable micro-kernel, the reference for the assembly.
var goKernel = sgemmKernel{mr: 6, nr: 16, name: "go", fn: kernelGo6x16}

// sgemmMicro is the fastest micro-kernel this CPU runs (set by the
// architecture's init).
var sgemmMicro = goKernel

// Sgemm computes c = alpha·op(a)·op(b) + beta·c. Degenerate calls, and
// arguments that do not describe the slices (which gonum reports with a
// panic), go to gonum.
func (g goBLASImpl) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !sgemmArgsOK(tA, tB, m, n, k, alpha, a, lda, b, ldb, c, ldc) {
		g.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	sgemmWith(sgemmMicro, tA != blas.NoTrans, tB != blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// serialSgemm is our SGEMM on the calling goroutine alone, whatever the
// engine: the small products that callers split across goroutines
// (MatMul's batches of small products, attention's tiles) run on it, so
// that no library's threads and none of our goroutines split them a
// second time, contending for the cores.
func serialSgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !sgemmArgsOK(tA, tB, m, n, k, alpha, a, lda, b, ldb, c, ldc) {
		gonum.Implementation{}.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	sgemmSerialWith(sgemmMicro, tA != blas.NoTrans, tB != blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemmArgsOK reports whether a call is one our SGEMM takes: sizes and
// strides that describe the slices, no zero dimension and alpha ≠ 0.
func sgemmArgsOK(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, c []float32, ldc int) bool {
	return gemmArgsOK(tA, tB, m, n, k, alpha, len(a), lda, len(b), ldb, len(c), ldc)
}

// gemmArgsOK is sgemmArgsOK for operands of any element type, of lengths
// la, lb and lc.
func gemmArgsOK(tA, tB blas.Transpose, m, n, k int, alpha float32, la, lda, lb, ldb, lc, ldc int) bool {
	okT := func(t blas.Transpose) bool {
		return t == blas.NoTrans || t == blas.Trans || t == blas.ConjTrans
	}
	if !okT(tA) || !okT(tB) || m <= 0 || n <= 0 || k <= 0 || alpha == 0 {
		return false
	}
	ar, ac := m, k
	if tA != blas.NoTrans {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB != blas.NoTrans {
		br, bc = n, k
	}
	return gemmFits(la, ar, ac, lda) && gemmFits(lb, br, bc, ldb) && gemmFits(lc, m, n, ldc)
}

// gemmFits reports whether n elements hold a rows×cols row-major matrix
// of stride ld.
func gemmFits(n, rows, cols, ld int) bool {
	return rows > 0 && cols > 0 && ld >= cols && n >= (rows-1)*ld+cols
}

// sgemmWith is the SGEMM on valid arguments with micro-kernel kern, split
// over goroutines by gemmParts.
func sgemmWith(kern sgemmKernel, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	gemmParts(tA, tB, m, n, k, kern.mr, kern.nr, lda, ldb, ldc, func(m, n, ao, bo, co int) {
		sgemmSerialWith(kern, tA, tB, m, n, k, alpha, a[ao:], lda, b[bo:], ldb, beta, c[co:], ldc)
	})
}

// gemmParts splits a product of valid arguments into independent products
// over goroutines: the rows of c (or its columns, when it is wider than
// tall) in one contiguous range per goroutine, in units of the
// micro-kernel's mr rows (or nr columns), run by parallelFor. It calls
// part with each range's size and the offsets of its op(a), op(b) and c in
// the operands, on the calling goroutine alone for products under
// sgemmSerial.
func gemmParts(tA, tB bool, m, n, k, mr, nr, lda, ldb, ldc int, part func(m, n, aoff, boff, coff int)) {
	workers := runtime.GOMAXPROCS(0)
	if m*n*k < sgemmSerial {
		workers = 1
	}
	unit, total := mr, m
	if n > m {
		unit, total = nr, n
	}
	units := (total + unit - 1) / unit
	workers = min(workers, units)
	if workers <= 1 {
		part(m, n, 0, 0, 0)
		return
	}
	chunk := (units + workers - 1) / workers * unit
	parts := (total + chunk - 1) / chunk
	parallelFor(parts, grain, func(p0, p1 int) {
		for p := p0; p < p1; p++ {
			lo, hi := p*chunk, min((p+1)*chunk, total)
			if n > m { // columns lo:hi of op(b) and c
				boff := lo
				if tB {
					boff = lo * ldb
				}
				part(m, hi-lo, 0, boff, lo)
				continue
			}
			aoff := lo * lda // rows lo:hi of op(a) and c
			if tA {
				aoff = lo
			}
			part(hi-lo, n, aoff, 0, lo*ldc)
		}
	})
}

// sgemmBufs holds a goroutine's packing buffers between products.
var sgemmBufs = sync.Pool{New: func() any { return new(gemmBuf[float32]) }}

// gemmBuf is one goroutine's packed operands (float32, or bfloat16 pairs)
// and edge tile.
type gemmBuf[E float32 | uint32] struct {
	a, b []E
	tile []float32
}

// grow returns s with at least n elements.
func grow[E float32 | uint32 | uint16](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// sgemmSerialWith is the blocked SGEMM on the calling goroutine.
func sgemmSerialWith(kern sgemmKernel, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmPanels(kern, m, n, k, alpha, beta, c, ldc, panelsOfA(a, lda, tA, kern.mr), panelsOfB(b, ldb, tB, kern.nr))
}

// sgemmPackedB is c = alpha·a·wᵀ + beta·c for a [m, k] (row stride lda)
// and a weight w [n, k] packed by PackLinear (f, one group), split over
// goroutines by gemmParts: the SGEMM reads w's panels as they were packed
// instead of packing them.
func sgemmPackedB(kern sgemmKernel, m, n, k int, alpha float32, a []float32, lda int, f *packedB, beta float32, c []float32, ldc int) {
	gemmParts(false, true, m, n, k, kern.mr, kern.nr, lda, k, ldc, func(m, n, ao, bo, co int) {
		col := bo / k // the part's first column, a multiple of nr
		sgemmPanels(kern, m, n, k, alpha, beta, c[co:], ldc, panelsOfA(a[ao:], lda, false, kern.mr), func(_ []float32, pc, kc, jc, _ int) []float32 {
			return f.block(0, k, pc, kc, col+jc)
		})
	})
}

// sgemmPanels is the blocked SGEMM on the calling goroutine over a pooled
// gemmBuf, op(a)'s panels from panelsA and op(b)'s from panelsB
// (gemmBlocked's packA and packB).
func sgemmPanels(kern sgemmKernel, m, n, k int, alpha, beta float32, c []float32, ldc int,
	panelsA func(dst []float32, ic, mc, pc, kc int) []float32, panelsB func(dst []float32, pc, kc, jc, nc int) []float32) {
	buf := sgemmBufs.Get().(*gemmBuf[float32])
	defer sgemmBufs.Put(buf)
	gemmBlocked(buf, kern.mr, kern.nr, 1, m, n, k, alpha, beta, c, ldc, panelsA, panelsB, kern.fn, kern.edge)
}

// panelsOfA is gemmBlocked's packA for op(a), a of row stride lda
// (transposed where tA), packed into dst in mr-row panels.
func panelsOfA(a []float32, lda int, tA bool, mr int) func(dst []float32, ic, mc, pc, kc int) []float32 {
	return func(dst []float32, ic, mc, pc, kc int) []float32 {
		packA(dst, a, lda, tA, ic, mc, pc, kc, mr)
		return dst
	}
}

// panelsOfB is gemmBlocked's packB for op(b), b of row stride ldb
// (transposed where tB), packed into dst in nr-column panels.
func panelsOfB(b []float32, ldb int, tB bool, nr int) func(dst []float32, pc, kc, jc, nc int) []float32 {
	return func(dst []float32, pc, kc, jc, nc int) []float32 {
		packB(dst, b, ldb, tB, pc, kc, jc, nc, nr)
		return dst
	}
}

// packedA is a [m, k] packed once for many products against it: each
// kc-deep block of k (sgemmKC, the last shorter) as the mr-row panels
// gemmBlocked reads, rows padded to mPad, a multiple of mr.
type packedA struct {
	data []float32
	mPad int
}

// packAllA packs a [m, k] (row stride lda) for kern's panels into buf,
// grown to fit, the blocks of rows in parallel.
func packAllA(buf *[]float32, kern sgemmKernel, a []float32, lda, m, k int) packedA {
	mr := kern.mr
	p := packedA{mPad: (m + mr - 1) / mr * mr}
	*buf = grow(*buf, p.mPad*k)
	p.data = (*buf)[:p.mPad*k]
	blocks := (k + sgemmKC - 1) / sgemmKC
	rowBlocks := (m + sgemmMC - 1) / sgemmMC
	parallelFor(blocks*rowBlocks, sgemmMC*sgemmKC, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			pc, ic := t/rowBlocks*sgemmKC, t%rowBlocks*sgemmMC
			kc, mc := min(sgemmKC, k-pc), min(sgemmMC, m-ic)
			packA(p.panels(nil, ic, mc, pc, kc), a, lda, false, ic, mc, pc, kc, mr)
		}
	})
	return p
}

// panels is gemmBlocked's packA over a packed a: the panels of rows ic…
// over k pc:pc+kc, as packed.
func (p packedA) panels(_ []float32, ic, _, pc, kc int) []float32 { return p.data[pc*p.mPad+ic*kc:] }

// gemmBlocked is the blocked product c = alpha·op(a)·op(b) + beta·c on the
// calling goroutine, with buf's buffers: a kc-deep slice of op(b), sgemmNC
// columns wide, packed into nr-column panels (packB), and an mc×kc block
// of op(a) into mr-row panels (packA), the micro-kernel kern multiplying
// one panel of each into an mr×nr tile of c. packA and packB return the
// panels to read: dst once they have packed them there, or panels packed
// ahead of time. A packed element holds
// kstep values of k (1 for float32, 2 for bfloat16 pairs), so a panel is
// ⌈kc/kstep⌉ elements deep. The last panel of a, where m is not a multiple
// of mr, runs on edge where there is one; edge tiles that c cannot hold
// whole go through buf.tile. Where b's panels were packed ahead of time
// (a weight's, which comes from memory), each full tile's kernel is handed
// its share of the following panel to prefetch (pfStep a step), so that
// the panel is in cache when its tiles start.
func gemmBlocked[E float32 | uint32](buf *gemmBuf[E], mr, nr, kstep, m, n, k int, alpha, beta float32,
	c []float32, ldc int, packA func(dst []E, ic, mc, pc, kc int) []E, packB func(dst []E, pc, kc, jc, nc int) []E,
	kern func(kk int, a, b []E, c []float32, ldc int, alpha, beta float32, next []E), edge edgeKernel[E]) {
	kk0 := (min(k, sgemmKC) + kstep - 1) / kstep
	nc0 := min((n+nr-1)/nr*nr, sgemmNC)
	mc0 := min((m+mr-1)/mr*mr, sgemmMC)
	buf.a = grow(buf.a, mc0*kk0)
	buf.b = grow(buf.b, kk0*nc0)
	buf.tile = grow(buf.tile, mr*nr)
	tile := buf.tile

	for jc := 0; jc < n; jc += sgemmNC {
		nc := min(sgemmNC, n-jc)
		for pc := 0; pc < k; pc += sgemmKC {
			kc := min(sgemmKC, k-pc)
			kk := (kc + kstep - 1) / kstep
			bt := beta
			if pc > 0 {
				bt = 1
			}
			pb := packB(buf.b, pc, kc, jc, nc)
			ahead := &pb[0] != &buf.b[0] // packed ahead of time, not by packB now
			for ic := 0; ic < m; ic += sgemmMC {
				mc := min(sgemmMC, m-ic)
				pa := packA(buf.a, ic, mc, pc, kc)
				for jr := 0; jr < nc; jr += nr {
					nn := min(nr, nc-jr)
					bp := pb[jr*kk : (jr+nr)*kk]
					var next []E // the following panel, nr·kk elements, if from memory
					if jr+nr < nc && ahead {
						next = pb[(jr+nr)*kk : (jr+2*nr)*kk]
					}
					for ir := 0; ir < mc; ir += mr {
						mm := min(mr, mc-ir)
						ap := pa[ir*kk : (ir+mr)*kk]
						ci := (ic+ir)*ldc + jc + jr
						if mm == mr && nn == nr {
							kern(kk, ap, bp, c[ci:ci+(mr-1)*ldc+nr], ldc, alpha, bt, next[min(len(next), ir/mr*kk*pfStep):])
							continue
						}
						if edge != nil && mm < mr {
							for i0 := 0; i0 < mm; {
								rows := edgeRows(mm - i0)
								r, cr := min(rows, mm-i0), ci+i0*ldc
								if r == rows && nn == nr {
									edge(rows, kk, ap[i0:], bp, c[cr:cr+(rows-1)*ldc+nr], ldc, alpha, bt)
								} else {
									edge(rows, kk, ap[i0:], bp, tile, nr, 1, 0)
									for i := range r {
										scaleInto(c[cr+i*ldc:cr+i*ldc+nn], tile[i*nr:i*nr+nn], alpha, bt)
									}
								}
								i0 += rows
							}
							continue
						}
						kern(kk, ap, bp, tile, nr, 1, 0, nil)
						for i := range mm {
							scaleInto(c[ci+i*ldc:ci+i*ldc+nn], tile[i*nr:i*nr+nn], alpha, bt)
						}
					}
				}
			}
		}
	}
}

// packA packs rows ic:ic+mc, columns pc:pc+kc of op(a) into mr-row panels,
// each kc·mr column-major (dst[p*mr+i]), the last padded with zeros. The
// full panels of the AVX-512 kernel (mr 12) gather in assembly when a is
// not transposed.
func packA(dst, a []float32, lda int, tA bool, ic, mc, pc, kc, mr int) {
	asm := !tA && mr == 12 && sgemmasm.Available512
	for ir := 0; ir < mc; ir += mr {
		mm := min(mr, mc-ir)
		d := dst[ir*kc : (ir+mr)*kc]
		switch {
		case tA: // op(a)[i][p] = a[p*lda+i]: rows of a are contiguous
			for p := range kc {
				src := a[(pc+p)*lda+ic+ir:]
				dp := d[p*mr : p*mr+mr]
				copy(dp, src[:mm])
				clear(dp[mm:])
			}
		case asm && mm == mr:
			src := a[(ic+ir)*lda+pc:]
			_ = src[(mr-1)*lda+kc-1]
			sgemmasm.PackA12(&d[0], &src[0], lda, kc)
		default:
			packT(d, a[(ic+ir)*lda+pc:], lda, mm, kc, mr)
		}
	}
}

// packB packs rows pc:pc+kc, columns jc:jc+nc of op(b) into nr-column
// panels, each kc·nr row-major (dst[p*nr+j]), the last padded with zeros.
// The full panels of the AVX-512 kernel (nr 32) gather in assembly when b
// is transposed.
func packB(dst, b []float32, ldb int, tB bool, pc, kc, jc, nc, nr int) {
	asm := tB && nr == 32 && sgemmasm.Available512
	for jr := 0; jr < nc; jr += nr {
		nn := min(nr, nc-jr)
		d := dst[jr*kc : (jr+nr)*kc]
		switch {
		case !tB:
			for p := range kc {
				src := b[(pc+p)*ldb+jc+jr:]
				dp := d[p*nr : p*nr+nr]
				copy(dp, src[:nn])
				clear(dp[nn:])
			}
		case asm && nn == nr: // op(b)[p][j] = b[j*ldb+p]
			src := b[(jc+jr)*ldb+pc:]
			_ = src[(nr-1)*ldb+kc-1]
			sgemmasm.PackBT32(&d[0], &src[0], ldb, kc)
		default:
			packT(d, b[(jc+jr)*ldb+pc:], ldb, nn, kc, nr)
		}
	}
}

// packT packs the transpose of a rows×kc block of src, of row stride ld,
// into a kc·w panel, d[p*w+i] = src[i*ld+p], zeroing columns rows:w. It
// is the Go reference for the assembly packs.
func packT(d, src []float32, ld, rows, kc, w int) {
	d = d[:kc*w]
	i := 0
	for ; i+4 <= rows; i += 4 {
		r0 := src[i*ld:][:kc]
		r1 := src[(i+1)*ld:][:kc]
		r2 := src[(i+2)*ld:][:kc]
		r3 := src[(i+3)*ld:][:kc]
		for p, v := range r0 {
			j := p*w + i
			col := d[j : j+4]
			col[0], col[1], col[2], col[3] = v, r1[p], r2[p], r3[p]
		}
	}
	for ; i < rows; i++ {
		for p, v := range src[i*ld:][:kc] {
			d[p*w+i] = v
		}
	}
	if rows < w {
		for p := range kc {
			clear(d[p*w+rows : p*w+w])
		}
	}
}

// kernelGo6x16 is the portable 6×16 micro-kernel (see sgemmKernel).
func kernelGo6x16(k int, a, b, c []float32, ldc int, alpha, beta float32, _ []float32) {
	const mr, nr = 6, 16
	var acc [mr][nr]float32
	a = a[:k*mr]
	b = b[:k*nr]
	for p := range k {
		bp := (*[nr]float32)(b[p*nr:])
		ap := (*[mr]float32)(a[p*mr:])
		for i := range mr {
			ai := ap[i]
			row := &acc[i]
			for j := range nr {
				row[j] += ai * bp[j]
			}
		}
	}
	for i := range mr {
		scaleInto(c[i*ldc:i*ldc+nr], acc[i][:], alpha, beta)
	}
}

// scaleInto sets dst[j] = alpha·acc[j] + beta·dst[j] (a micro-kernel's
// store of a row), without reading dst when beta is 0.
func scaleInto(dst, acc []float32, alpha, beta float32) {
	dst = dst[:len(acc)]
	if beta == 0 {
		for j, v := range acc {
			dst[j] = alpha * v
		}
		return
	}
	for j, v := range acc {
		dst[j] = alpha*v + beta*dst[j]
	}
}
