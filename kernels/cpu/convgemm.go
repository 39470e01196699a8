package cpu

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

var (
	_ kernels.ConvPacker   = (*Backend)(nil)
	_ kernels.LinearPacker = (*Backend)(nil)
)

// convRowFloats bounds the output block, in float32 values (1 MiB, a
// core's L2 on this repository's AVX-512 machine), that a task of convGEMM
// multiplies before it applies the epilogue: the block is still in cache
// when bias and activation pass over it.
const convRowFloats = 1 << 18

// convTask is one task of convGEMM: output pixels r0:r1 by the group's
// output channels c0:c1.
type convTask struct{ gr, r0, r1, c0, c1 int }

// convTasks splits the product of each group, M output pixels by cog
// output channels, into tasks for workers goroutines: a group per task when
// there are as many groups as workers, else each group's pixels in ranges
// of whole mr-row panels when there are at least four panels per share,
// else its channels in ranges of whole nr-column panels (a small image's
// layer, whose weights are the larger operand, split by the filters each
// task reads), then its pixels for any workers left. inPlaceRows (a product
// that reads its pixels where they lie, so tasks of the same pixels pack
// nothing twice) splits the channels also wherever they outnumber the
// pixels.
func convTasks(groups, M, cog, mr, nr, workers int, inPlaceRows bool) []convTask {
	want := max(1, (workers+groups-1)/groups)
	rowUnits, colUnits := (M+mr-1)/mr, (cog+nr-1)/nr
	pr, pc := want, 1
	if rowUnits < 4*want || inPlaceRows && cog > M {
		pc = min(want, colUnits)
		pr = max(1, min(rowUnits, want/pc))
	}
	var ts []convTask
	for gr := range groups {
		for i := range pr {
			r0, r1 := splitUnits(M, mr, pr, i)
			for j := range pc {
				c0, c1 := splitUnits(cog, nr, pc, j)
				if r0 < r1 && c0 < c1 {
					ts = append(ts, convTask{gr: gr, r0: r0, r1: r1, c0: c0, c1: c1})
				}
			}
		}
	}
	return ts
}

// splitUnits is part i of n of [0, total) in units of unit: contiguous
// ranges of whole units, as even as whole units allow.
func splitUnits(total, unit, n, i int) (lo, hi int) {
	units := (total + unit - 1) / unit
	lo = min(total, units*i/n*unit)
	hi = min(total, units*(i+1)/n*unit)
	return lo, hi
}

// convGEMM is Conv2D's implicit GEMM on our own SGEMM: out [M, Co] = beta·out
// + im2col(x) [M, K] · wᵀ [K, Co] per group, then bias and act. Its tasks
// (convTasks) run in parallel; each packs its rows of im2col(x) straight from
// x into the micro-kernel's panels, one kc-deep block of mr rows at a time
// through an L1-sized buffer (a 1×1 stride-1 convolution reads x as the
// matrix itself), so no im2col matrix is ever written, and applies the
// epilogue to each block of its output while it is in cache.
//
// packed, when not nil, holds the filters as packB lays them out
// (PackConvFilters), read in place of packing wv.
func convGEMM(ov, xv, wv []float32, packed *packedB, bias []float32, g kernels.ConvDims, beta float32, act kernels.Activation) {
	kern := sgemmMicro
	mr, nr := kern.mr, kern.nr
	M, K, Co := g.M(), g.K(), g.Co
	cog := Co / g.Groups
	plain := g.PointwiseGEMM()
	tasks := convTasks(g.Groups, M, cog, mr, nr, runtime.GOMAXPROCS(0), false)
	parallelFor(len(tasks), max(1, M/len(tasks)*cog*K), func(lo, hi int) {
		buf := sgemmBufs.Get().(*gemmBuf[float32])
		defer sgemmBufs.Put(buf)
		rows := make([]float32, mr*min(K, sgemmKC))
		for _, t := range tasks[lo:hi] {
			n := t.c1 - t.c0
			w := wv[(t.gr*cog+t.c0)*K:]
			col := t.gr*cog + t.c0
			block := max(sgemmMC, convRowFloats/n/sgemmMC*sgemmMC)
			for r0 := t.r0; r0 < t.r1; r0 += block {
				m := min(block, t.r1-r0)
				packRows := func(dst []float32, ic, mc, pc, kc int) []float32 {
					if plain {
						packA(dst, xv, K, false, r0+ic, mc, pc, kc, mr)
						return dst
					}
					a := rows[:mr*kc]
					for ir := 0; ir < mc; ir += mr {
						mm := min(mr, mc-ir)
						for i := range mm {
							packPatch(a[i*kc:(i+1)*kc], xv, g, r0+ic+ir+i, t.gr, pc, pc+kc)
						}
						packA(dst[ir*kc:(ir+mr)*kc], a, kc, false, 0, mm, 0, kc, mr)
					}
					return dst
				}
				packFilters := func(dst []float32, pc, kc, jc, nc int) []float32 {
					if packed != nil {
						return packed.block(t.gr, K, pc, kc, t.c0+jc)
					}
					packB(dst, w, K, true, pc, kc, jc, nc, nr)
					return dst
				}
				c := ov[r0*Co+col:]
				gemmBlocked(buf, mr, nr, 1, m, n, K, 1, beta, c, Co, packRows, packFilters, kern.fn, kern.edge)
				if bias != nil || act != kernels.ActNone {
					var b []float32
					if bias != nil {
						b = bias[col : col+n]
					}
					for r := range m {
						biasAct(c[r*Co:r*Co+n], n, b, act)
					}
				}
			}
		}
	})
}

// ownSGEMM reports whether the process's engine is our SGEMM, whose
// micro-kernel and packing convGEMM drives.
func ownSGEMM() bool {
	_, ok := engine().impl.(goBLASImpl)
	return ok
}

// packedB is a weight packed as our SGEMM's op(b) for products against
// its transpose (kernels.ConvPacker, kernels.LinearPacker): for each of
// its groups of rows, their transpose [K, cog] in depth-deep blocks of
// nr-column panels as packB lays them out over the group's whole width
// (padded to cogP columns), block after block, in memory from the
// backend's pool. The blocks are sgemmKC deep for gemmBlocked, K deep (one
// block) for convRows. A bfloat16 linear weight is packed for our
// bfloat16 GEMM instead: pairs holds its panels of k-pairs as
// packPairsAlong lays them out, in sgemmKC-deep blocks, and panels is nil.
type packedB struct {
	groups, nr, cogP, depth int
	panels                  []float32
	pairs                   []uint32
	mem                     *hostBuf
	class                   int64
}

// pairBlock returns the pair panels of a bfloat16 weight's kc-deep block
// at row pc of its transpose from column col (a multiple of nr) on.
func (f *packedB) pairBlock(pc, kc, col int) []uint32 {
	base, kk := pc/2*f.cogP, (kc+1)/2
	return f.pairs[base+col*kk : base+f.cogP*kk]
}

// block returns the panels of group gr's kc-deep block at row pc of its
// transpose (K rows) from column col (a multiple of nr) on.
func (f *packedB) block(gr, K, pc, kc, col int) []float32 {
	base := (gr*K + pc) * f.cogP
	return f.panels[base+col*kc : base+f.cogP*kc]
}

// PackConvFilters packs w, F32 filters [Co, Kh, Kw, Ci/groups], for
// convGEMM on our own SGEMM (see kernels.ConvPacker). Other dtypes, other
// engines and the narrow groups that Conv2D takes as dot products keep
// packing on every call: there the packed form would go unread.
func (b *Backend) PackConvFilters(w *kernels.Tensor, groups int) error {
	const name = "cpu: PackConvFilters"
	if err := check.Op(name).Tensor("w", w, b).Err(); err != nil {
		return err
	}
	s := w.Shape()
	if len(s) != 4 || groups < 1 || s[0]%groups != 0 {
		return fmt.Errorf("%s: w %v for %d groups: want [Co, Kh, Kw, Ci/groups] with groups ≥ 1 dividing Co: %w",
			name, w, groups, kernels.ErrShape)
	}
	k := s[1] * s[2] * s[3]
	depth := sgemmKC
	if rowsConv(groups) {
		depth = k // convRows reads the filters
	}
	return b.packB(name, w, groups, k, depth, w.DType() == kernels.F32 && s[0]/groups > narrowGroup)
}

// PackLinear packs w, an F32 or F16 linear layer's weight [N, K], for
// MatMul's products against its transpose on our own SGEMM (an F16 one
// widened to float32, as the products widen it), or a BF16 one for our
// bfloat16 GEMM (see kernels.LinearPacker). Other dtypes and other
// engines keep their own paths: there the packed form would go unread.
func (b *Backend) PackLinear(w *kernels.Tensor) error {
	const name = "cpu: PackLinear"
	if err := check.Op(name).Tensor("w", w, b).Err(); err != nil {
		return err
	}
	s := w.Shape()
	if len(s) != 2 {
		return fmt.Errorf("%s: w %v: want a linear layer's weight [N, K]: %w", name, w, kernels.ErrShape)
	}
	if w.DType() == kernels.BF16 {
		return b.packPairs(name, w, s[0], s[1])
	}
	return b.packB(name, w, 1, s[1], sgemmKC, true)
}

// packPairs keeps w, a BF16 weight [n, k], also packed (packedB.pairs)
// where the backend's bfloat16 GEMM is our own; it drops any packed form
// w had.
func (b *Backend) packPairs(name string, w *kernels.Tensor, n, k int) error {
	st := w.Storage().(*storage)
	b.dropPacked(st)
	g, ok := b.bf16.(bf16Gemm)
	if !ok {
		return nil
	}
	nr := g.kern.nr
	cogP := (n + nr - 1) / nr * nr
	size := (k + 1) / 2 * cogP
	mem, class, err := b.pool.Get(int64(size) * 4)
	if err != nil {
		return fmt.Errorf("%s: w %v: %w", name, w, err)
	}
	f := &packedB{groups: 1, nr: nr, cogP: cogP, depth: sgemmKC, mem: mem, class: class,
		pairs: unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(mem.buf))), size)}
	wv := u16(w)
	blocks, panels := (k+sgemmKC-1)/sgemmKC, cogP/nr
	parallelFor(blocks*panels, sgemmKC*nr, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			pc, jc := i/panels*sgemmKC, i%panels*nr
			kc := min(sgemmKC, k-pc)
			packPairsAlong(f.pairBlock(pc, kc, jc), wv[jc*k+pc:], k, min(nr, n-jc), kc, nr)
		}
	})
	st.packed = f
	return nil
}

// packB keeps w, groups of rows of k values, also packed (packedB, in
// blocks depth deep, an F16 w widened to float32) where it is F32 or F16,
// the engine our SGEMM and read is set; it drops any packed form w had.
func (b *Backend) packB(name string, w *kernels.Tensor, groups, k, depth int, read bool) error {
	st := w.Storage().(*storage)
	b.dropPacked(st)
	if (w.DType() != kernels.F32 && w.DType() != kernels.F16) || !ownSGEMM() || !read {
		return nil
	}
	f, err := b.newPacked(in32(w), groups, w.Shape()[0]/groups, k, depth, sgemmMicro.nr)
	if err != nil {
		return fmt.Errorf("%s: w %v: %w", name, w, err)
	}
	st.packed = f
	return nil
}

// newPacked packs wv, groups of cog rows of k values, into a packedB of
// nr-column panels in blocks depth deep, in memory from the backend's
// pool.
func (b *Backend) newPacked(wv []float32, groups, cog, k, depth, nr int) (*packedB, error) {
	cogP := (cog + nr - 1) / nr * nr
	n := groups * k * cogP
	mem, class, err := b.pool.Get(int64(n) * 4)
	if err != nil {
		return nil, err
	}
	f := &packedB{groups: groups, nr: nr, cogP: cogP, depth: depth, mem: mem, class: class,
		panels: unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(mem.buf))), n)}
	packPanels(f.panels, wv, groups, cog, k, depth, nr)
	return f, nil
}

// packPanels packs wv, groups of cog rows of k values, as packedB lays
// them out: per group, depth-deep blocks of nr-column panels of the
// rows' transpose, the columns past cog zero; in parallel over panels.
func packPanels(dst, wv []float32, groups, cog, k, depth, nr int) {
	cogP := (cog + nr - 1) / nr * nr
	blocks, panels := (k+depth-1)/depth, cogP/nr
	parallelFor(groups*blocks*panels, min(depth, k)*nr, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gr, pc, jc := i/(blocks*panels), i/panels%blocks*depth, i%panels*nr
			kc := min(depth, k-pc)
			packB(dst[(gr*k+pc)*cogP+jc*kc:], wv[gr*cog*k:], k, true, pc, kc, jc, min(nr, cog-jc), nr)
		}
	})
}

// dropPacked returns st's packed form and its Winograd transform, if
// any, to the pool.
func (b *Backend) dropPacked(st *storage) {
	if f := st.packed; f != nil {
		st.packed = nil
		b.pool.Put(f.mem, f.class)
	}
	if f := st.wino.Swap(nil); f != nil {
		b.pool.Put(f.mem, f.class)
	}
}

// packedOf returns w's packed form for products of its groups of rows on
// our own SGEMM in blocks depth deep, or nil where there is none for them.
func packedOf(w *kernels.Tensor, groups, depth int) *packedB {
	f := w.Storage().(*storage).packed
	if f == nil || f.panels == nil || f.groups != groups || f.nr != sgemmMicro.nr || f.depth != depth {
		return nil
	}
	return f
}

// pairsOf returns w's packed form for our bfloat16 GEMM (packPairs), or
// nil where there is none.
func pairsOf(w *kernels.Tensor) *packedB {
	if f := w.Storage().(*storage).packed; f != nil && f.pairs != nil {
		return f
	}
	return nil
}
