package cpu

import (
	"math"
	"sync"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu/internal/sgemmasm"
)

// bf16Gemmer is an engine with a bfloat16 GEMM: c = alpha·op(a)·op(b) +
// beta·c, a and b in bfloat16 as stored, c in float32, row-major, with the
// arguments of Sgemm.
type bf16Gemmer interface {
	Bf16gemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []uint16, lda int,
		b []uint16, ldb int, beta float32, c []float32, ldc int)
}

// widenedBf16gemm is Bf16gemm through float32: a and b widened whole, then
// the engine's SGEMM (through blas32, which reports bad arguments).
func widenedBf16gemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []uint16, lda int,
	b []uint16, ldb int, beta float32, c []float32, ldc int) {
	widen := func(s []uint16) []float32 {
		w := make([]float32, len(s))
		for i, h := range s {
			w[i] = kernels.BF16ToFloat32(h)
		}
		return w
	}
	blas32.Implementation().Sgemm(tA, tB, m, n, k, alpha, widen(a), lda, widen(b), ldb, beta, c, ldc)
}

// bf16Kernel is a bfloat16 micro-kernel: c[i*ldc+j] = alpha·Σp a·b +
// beta·c over an mr×nr tile, for packed panels of k2 bfloat16 pairs, a
// (k2·mr, a[p*mr+i] holding op(a)[i][2p] in its low half and
// op(a)[i][2p+1] in its high half) and b (k2·nr, b[p*nr+j] holding
// op(b)[2p][j] and op(b)[2p+1][j]); beta 0 overwrites c without reading it,
// and next is sgemmKernel's prefetch hint.
type bf16Kernel struct {
	mr, nr int
	name   string
	fn     func(k2 int, a, b []uint32, c []float32, ldc int, alpha, beta float32, next []uint32)
}

// goBF16Kernel is the portable bfloat16 micro-kernel, the reference for
// the assembly (the same tile, and VDPBF16PS's arithmetic).
var goBF16Kernel = bf16Kernel{mr: 12, nr: 32, name: "go", fn: kernelGoBF16x12x32}

// asmBF16Kernel is the AVX-512 BF16 micro-kernel where it runs.
var asmBF16Kernel = bf16Kernel{mr: 12, nr: 32, name: "avx512-bf16", fn: kernelAsmBF16x12x32}

// ownBF16Name is our bfloat16 GEMM as DeviceInfo.BLAS names it, after
// the SGEMM's name.
const ownBF16Name = "zbench-bf16"

// ownBF16 is our bfloat16 GEMM (bf16Gemmer) on the AVX-512 BF16
// micro-kernel, or nil where the processor lacks it (the products are then
// widened to float32).
func ownBF16() bf16Gemmer {
	if !sgemmasm.AvailableBF16 {
		return nil
	}
	return bf16Gemm{asmBF16Kernel}
}

// bf16Gemm is a blocked bfloat16 GEMM over micro-kernel kern, split over
// goroutines as our SGEMM is.
type bf16Gemm struct{ kern bf16Kernel }

// Bf16gemm computes c = alpha·op(a)·op(b) + beta·c with a and b in
// bfloat16, summing in float32. Degenerate calls and arguments that do not
// describe the slices go through float32 (whose SGEMM reports the
// latter).
func (g bf16Gemm) Bf16gemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []uint16, lda int,
	b []uint16, ldb int, beta float32, c []float32, ldc int) {
	if !gemmArgsOK(tA, tB, m, n, k, alpha, len(a), lda, len(b), ldb, len(c), ldc) {
		widenedBf16gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	ta, tb := tA != blas.NoTrans, tB != blas.NoTrans
	gemmParts(ta, tb, m, n, k, g.kern.mr, g.kern.nr, lda, ldb, ldc, func(m, n, ao, bo, co int) {
		bf16SerialWith(g.kern, ta, tb, m, n, k, alpha, a[ao:], lda, b[bo:], ldb, beta, c[co:], ldc)
	})
}

// bf16Bufs holds a goroutine's bfloat16 packing buffers between products.
var bf16Bufs = sync.Pool{New: func() any { return new(gemmBuf[uint32]) }}

// bf16SerialWith is the blocked bfloat16 GEMM on valid arguments, on the
// calling goroutine.
func bf16SerialWith(kern bf16Kernel, tA, tB bool, m, n, k int, alpha float32, a []uint16, lda int,
	b []uint16, ldb int, beta float32, c []float32, ldc int) {
	buf := bf16Bufs.Get().(*gemmBuf[uint32])
	defer bf16Bufs.Put(buf)
	mr, nr := kern.mr, kern.nr
	gemmBlocked(buf, mr, nr, 2, m, n, k, alpha, beta, c, ldc, pairPanelsOfA(a, lda, tA, mr),
		func(dst []uint32, pc, kc, jc, nc int) []uint32 {
			for jr := 0; jr < nc; jr += nr {
				nn, d := min(nr, nc-jr), dst[jr*((kc+1)/2):]
				if tB { // op(b)[p][j] = b[j*ldb+p]
					packPairsAlong(d, b[(jc+jr)*ldb+pc:], ldb, nn, kc, nr)
				} else {
					packPairsAcross(d, b[pc*ldb+jc+jr:], ldb, kc, nn, nr)
				}
			}
			return dst
		},
		kern.fn, nil)
}

// packedBf16gemm is c = alpha·a·wᵀ + beta·c for bfloat16 a [m, k] (row
// stride lda) and a weight w [n, k] packed by PackLinear (f), split over
// goroutines by gemmParts: the GEMM reads w's pair panels as they were
// packed instead of packing them.
func (g bf16Gemm) packedBf16gemm(m, n, k int, alpha float32, a []uint16, lda int, f *packedB, beta float32, c []float32, ldc int) {
	mr, nr := g.kern.mr, g.kern.nr
	gemmParts(false, true, m, n, k, mr, nr, lda, k, ldc, func(m, n, ao, bo, co int) {
		col := bo / k // the part's first column, a multiple of nr
		buf := bf16Bufs.Get().(*gemmBuf[uint32])
		defer bf16Bufs.Put(buf)
		gemmBlocked(buf, mr, nr, 2, m, n, k, alpha, beta, c[co:], ldc, pairPanelsOfA(a[ao:], lda, false, mr),
			func(_ []uint32, pc, kc, jc, _ int) []uint32 { return f.pairBlock(pc, kc, col+jc) },
			g.kern.fn, nil)
	})
}

// pairPanelsOfA is gemmBlocked's packA for a bfloat16 op(a), a of row
// stride lda (transposed where tA), packed into dst in mr-row panels of
// k-pairs.
func pairPanelsOfA(a []uint16, lda int, tA bool, mr int) func(dst []uint32, ic, mc, pc, kc int) []uint32 {
	return func(dst []uint32, ic, mc, pc, kc int) []uint32 {
		for ir := 0; ir < mc; ir += mr {
			mm, d := min(mr, mc-ir), dst[ir*((kc+1)/2):]
			if tA { // op(a)[i][p] = a[p*lda+i]
				packPairsAcross(d, a[pc*lda+ic+ir:], lda, kc, mm, mr)
			} else {
				packPairsAlong(d, a[(ic+ir)*lda+pc:], lda, mm, kc, mr)
			}
		}
		return dst
	}
}

// packPairsAlong packs a rows×kc block of src (row stride ld) whose k runs
// along the rows into a ⌈kc/2⌉·w panel of pairs: d[p*w+i] holds
// src[i*ld+2p] in its low half and src[i*ld+2p+1] (0 past kc) in its
// high half; rows rows:w are zero. A pair is then one uint32 of src, so
// a full panel of an even depth from a 4-byte aligned src is the float32
// transposing pack's work (sgemmasm.PackA12, PackBT32) on those words.
func packPairsAlong(d []uint32, src []uint16, ld, rows, kc, w int) {
	k2 := (kc + 1) / 2
	d = d[:k2*w]
	if rows == w && kc%2 == 0 && ld%2 == 0 && uintptr(unsafe.Pointer(&src[0]))%4 == 0 && sgemmasm.Available512 {
		_ = src[(rows-1)*ld+kc-1]
		dw, sw := (*float32)(unsafe.Pointer(&d[0])), (*float32)(unsafe.Pointer(&src[0]))
		switch w {
		case 12:
			sgemmasm.PackA12(dw, sw, ld/2, k2)
			return
		case 32:
			sgemmasm.PackBT32(dw, sw, ld/2, k2)
			return
		}
	}
	for i := range rows {
		r := src[i*ld:][:kc]
		for p := range kc / 2 {
			d[p*w+i] = uint32(r[2*p]) | uint32(r[2*p+1])<<16
		}
		if kc%2 == 1 {
			d[(k2-1)*w+i] = uint32(r[kc-1])
		}
	}
	if rows < w {
		for p := range k2 {
			clear(d[p*w+rows : p*w+w])
		}
	}
}

// packPairsAcross packs a kc×cols block of src (row stride ld) whose k runs
// down the columns into a ⌈kc/2⌉·w panel of pairs: d[p*w+j] holds
// src[2p*ld+j] in its low half and src[(2p+1)*ld+j] (0 past kc) in its
// high half; columns cols:w are zero. Full 32-column panels of an even
// depth are sgemmasm.PackPairs32's.
func packPairsAcross(d []uint32, src []uint16, ld, kc, cols, w int) {
	k2 := (kc + 1) / 2
	d = d[:k2*w]
	if cols == 32 && w == 32 && kc%2 == 0 && sgemmasm.Available512 {
		_ = src[(kc-1)*ld+31]
		sgemmasm.PackPairs32(&d[0], &src[0], ld, k2)
		return
	}
	for p := range k2 {
		dp := d[p*w : p*w+w]
		lo := src[2*p*ld:][:cols]
		if 2*p+1 < kc {
			hi := src[(2*p+1)*ld:][:cols]
			for j, v := range lo {
				dp[j] = uint32(v) | uint32(hi[j])<<16
			}
		} else {
			for j, v := range lo {
				dp[j] = uint32(v)
			}
		}
		clear(dp[cols:])
	}
}

// kernelAsmBF16x12x32 is sgemmasm.KernelBF16x12x32 on slices (see
// bf16Kernel).
func kernelAsmBF16x12x32(k2 int, a, b []uint32, c []float32, ldc int, alpha, beta float32, next []uint32) {
	_ = a[k2*12-1]
	_ = b[k2*32-1]
	_ = c[11*ldc+31]
	sgemmasm.KernelBF16x12x32(k2, &a[0], &b[0], &c[0], ldc, alpha, beta, first(next))
}

// kernelGoBF16x12x32 is the portable 12×32 bfloat16 micro-kernel (see
// bf16Kernel), with VDPBF16PS's arithmetic: each pair's two products
// (exact in float32) added to the sum in turn, the high halves' first,
// bfloat16 subnormals read as zero and subnormal sums flushed to zero.
func kernelGoBF16x12x32(k2 int, a, b []uint32, c []float32, ldc int, alpha, beta float32, _ []uint32) {
	const mr, nr = 12, 32
	var acc [mr][nr]float32
	a = a[:k2*mr]
	b = b[:k2*nr]
	for p := range k2 {
		bp := (*[nr]uint32)(b[p*nr:])
		ap := (*[mr]uint32)(a[p*mr:])
		for i := range mr {
			alo, ahi := bf16Half(ap[i]<<16), bf16Half(ap[i]&0xffff0000)
			row := &acc[i]
			for j := range nr {
				s := ftz(row[j] + ahi*bf16Half(bp[j]&0xffff0000))
				row[j] = ftz(s + alo*bf16Half(bp[j]<<16))
			}
		}
	}
	for i := range mr {
		scaleInto(c[i*ldc:i*ldc+nr], acc[i][:], alpha, beta)
	}
}

// bf16Half is the float32 of bits u (a bfloat16 in the high half), a
// subnormal read as zero of its sign.
func bf16Half(u uint32) float32 {
	if u&0x7f800000 == 0 {
		u &= 0x80000000
	}
	return math.Float32frombits(u)
}

// ftz flushes a subnormal float32 to zero of its sign.
func ftz(x float32) float32 {
	if u := math.Float32bits(x); u&0x7f800000 == 0 {
		return math.Float32frombits(u & 0x80000000)
	}
	return x
}
