package cpu

import (
	"math"
	"runtime"
	"sync"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu/internal/sgemmasm"
)

// convRowsL2Floats bounds the filter panels, in float32 values (512 KiB,
// half a core's L2 on this repository's AVX-512 machine), that convRows
// multiplies every tile of its pixels by before it moves to the next.
const convRowsL2Floats = 1 << 17

// convRowsStreamFloats is the size of x, in float32 values (4 MiB), past
// which a pointwise convolution's kernels prefetch the next tile's rows of
// x: smaller inputs are still in the cache from the layer before, where
// the prefetch only costs.
const convRowsStreamFloats = 1 << 20

// rowsConv reports whether Conv2D of groups groups runs as convRows: one
// group, on our own SGEMM, where the AVX-512 in-place kernel runs.
func rowsConv(groups int) bool {
	return groups == 1 && sgemmasm.Available512 && ownSGEMM()
}

// convRows is Conv2D of one group on KernelRows12x32: out [M, Co] =
// im2col(x) [M, K] · wᵀ [K, Co] + residual, then bias and act, without
// packing x. Twelve output pixels of one output row whose windows stay
// inside the image's columns (else eight, else four: KernelRows8x32 and
// 4x32) are a tile whose window rows are 12 runs of Kw·Ci values of x,
// Stride·Ci apart, which the kernel reads where they lie, one segment per
// window row inside the image (any twelve pixels in a row, for a 1×1
// stride-1 convolution without padding); the residual, bias and a ReLU
// are applied in its store. The other pixels (at the image's edges, and
// every pixel under dilation) are packed as im2col rows and multiplied
// twelve at a time through a tile. panels holds the filters
// packed in full depth: nr-column panels of K rows (packB over all of K).
// res, when not nil, is the residual (out itself, or its own tensor).
func convRows(ov, xv, panels, res, bias []float32, g kernels.ConvDims, act kernels.Activation) {
	const mr, nr = 12, 32
	M, K, Co := g.M(), g.K(), g.Co
	floor, fused := float32(math.Inf(-1)), act == kernels.ActNone || act == kernels.ActReLU
	if act == kernels.ActReLU {
		floor = 0
	}
	beta := float32(0)
	if res != nil {
		beta = 1
	}
	chunk := max(nr, convRowsL2Floats/K/nr*nr) // columns per pass over the pixels
	pointwise := g.PointwiseGEMM()
	tasks := convTasks(1, M, Co, mr, nr, runtime.GOMAXPROCS(0), pointwise)
	parallelFor(len(tasks), max(1, M/len(tasks)*Co*K), func(lo, hi int) {
		bufs := convRowsBufs.Get().(*convRowsBuf)
		defer convRowsBufs.Put(bufs)
		for _, t := range tasks[lo:hi] {
			runs, left := bufs.split(g, t.r0, t.r1)
			patches := bufs.patches(len(left), K)
			for i, r := range left {
				packPatch(patches[i*K:(i+1)*K], xv, g, r, 0, 0, K)
			}
			for c0 := t.c0; c0 < t.c1; c0 += chunk {
				c1 := min(t.c1, c0+chunk)
				for ri, run := range runs {
					r, rows := run.r, run.rows
					kern := rowsKernel(rows)
					a, lda, segs, k0 := tileRows(g, r)
					// A pointwise convolution's kernels prefetch the next
					// run's rows of x (contiguous) where x comes from
					// memory, each call over this run's panels its part.
					var next []float32
					if ri+1 < len(runs) && pointwise && len(xv) > convRowsStreamFloats {
						nx := runs[ri+1]
						next = xv[nx.r*K : (nx.r+nx.rows)*K]
					}
					ahead := nextRows{next: next, calls: (c1 - c0 + nr - 1) / nr, k: K}
					last := a + (rows-1)*lda + (segs-1)*g.W*g.Ci + g.Kw*g.Ci - 1
					_ = xv[last]
					for col := c0; col < c1; col += nr {
						p := panels[col*K+k0*nr:]
						_ = p[(K-k0)*nr-1]
						if col+nr <= Co {
							c := ov[r*Co+col:]
							_ = c[(rows-1)*Co+nr-1]
							rp := &c[0]
							if res != nil {
								rp = &res[r*Co+col]
							}
							bp := &zeros32[0]
							if bias != nil {
								bp = &bias[col]
							}
							kern(g.Kw*g.Ci, &xv[a], lda, segs, g.W*g.Ci,
								&p[0], &c[0], Co, rp, beta, floor, bp, ahead.part())
							if !fused {
								for i := range rows {
									applyAct(c[i*Co:i*Co+nr], c[i*Co:i*Co+nr], act)
								}
							}
							continue
						}
						kern(g.Kw*g.Ci, &xv[a], lda, segs, g.W*g.Ci,
							&p[0], &bufs.tile[0], nr, &bufs.tile[0], 0, float32(math.Inf(-1)), &zeros32[0], ahead.part())
						for i := range rows {
							finishRow(ov, res, bias, bufs.tile[i*nr:(i+1)*nr], r+i, col, Co, act)
						}
					}
				}
				for i0 := 0; i0 < len(left); i0 += mr {
					a := patches[i0*K:]
					rows := min(mr, len(left)-i0)
					kern := rowsKernel(rows)
					for col := c0; col < c1; col += nr {
						p := panels[col*K:]
						_ = p[K*nr-1]
						kern(K, &a[0], K, 1, K, &p[0], &bufs.tile[0], nr, &bufs.tile[0], 0, float32(math.Inf(-1)), &zeros32[0], nil)
						for i := range rows {
							finishRow(ov, res, bias, bufs.tile[i*nr:(i+1)*nr], left[i0+i], col, Co, act)
						}
					}
				}
			}
		}
	})
}

// rowsKernel is the in-place kernel of fewest rows (12, 8 or 4) that
// covers rows.
func rowsKernel(rows int) func(k int, a *float32, lda, segs, segStride int, b, c *float32, ldc int, r *float32, beta, floor float32, bias, next *float32) {
	switch {
	case rows > 8:
		return sgemmasm.KernelRows12x32
	case rows > 4:
		return sgemmasm.KernelRows8x32
	}
	return sgemmasm.KernelRows4x32
}

// zeros32 is a bias of 32 zeros, for kernel calls without one.
var zeros32 [32]float32

// tileRows is where the tile of twelve output pixels from r reads x: the
// offset of its first pixel's first window row inside the image, the
// stride between its pixels, the window rows inside the image (segs; one
// run of K values for a 1×1 stride-1 convolution without padding, whose
// pixels are x's rows), and the first of them as a row of im2col (k0, its
// first column).
func tileRows(g kernels.ConvDims, r int) (a, lda, segs, k0 int) {
	j, i, n := r%g.Wo, (r/g.Wo)%g.Ho, r/(g.Wo*g.Ho)
	y0, x0 := i*g.Stride[0]-g.Pad[0], j*g.Stride[1]-g.Pad[1]
	kh0, kh1 := max(0, -y0), min(g.Kh, g.H-y0)
	return ((n*g.H+y0+kh0)*g.W + x0) * g.Ci, g.Stride[1] * g.Ci, kh1 - kh0, kh0 * g.Kw * g.Ci
}

// finishRow stores the nr products in acc as output pixel r's channels
// col… (as many as Co leaves), with the residual, bias and act added as
// the kernel's store adds them.
func finishRow(ov, res, bias, acc []float32, r, col, Co int, act kernels.Activation) {
	n := min(len(acc), Co-col)
	dst := ov[r*Co+col : r*Co+col+n]
	for j := range dst {
		v := acc[j]
		if res != nil {
			v += res[r*Co+col+j]
		}
		b := float32(0)
		if bias != nil {
			b = bias[col+j]
		}
		dst[j] = v + b
	}
	if act != kernels.ActNone {
		applyAct(dst, dst, act)
	}
}

// convRowsBuf is one goroutine's buffers for convRows: the tile starts and
// edge pixels of its task, their im2col rows, and a tile.
type convRowsBuf struct {
	runs []rowRun
	left []int
	rows []float32
	tile [12 * 32]float32
}

var convRowsBufs = sync.Pool{New: func() any { return new(convRowsBuf) }}

// rowRun is a tile that the kernel reads in place: rows output pixels
// (12, 8 or 4) from r.
type rowRun struct{ r, rows int }

// split sorts output pixels r0:r1 into tiles that the kernel reads in
// place, of twelve pixels where they fit, else eight or four, and the
// pixels left over.
func (b *convRowsBuf) split(g kernels.ConvDims, r0, r1 int) (runs []rowRun, left []int) {
	runs, left = b.runs[:0], b.left[:0]
	pointwise := g.PointwiseGEMM()
next:
	for r := r0; r < r1; {
		for _, rows := range [...]int{12, 8, 4} {
			if pointwise && r+rows <= r1 || inPlaceTile(g, r, r1, rows) {
				runs = append(runs, rowRun{r, rows})
				r += rows
				continue next
			}
		}
		left = append(left, r)
		r++
	}
	b.runs, b.left = runs, left
	return runs, left
}

// inPlaceTile reports whether the mr output pixels from r (all before end)
// lie in one output row, their windows inside the image's columns and at
// least one window row inside its rows, without dilation.
func inPlaceTile(g kernels.ConvDims, r, end, mr int) bool {
	j, i := r%g.Wo, (r/g.Wo)%g.Ho
	x0, y0 := j*g.Stride[1]-g.Pad[1], i*g.Stride[0]-g.Pad[0]
	return g.Dilation == [2]int{1, 1} && r+mr <= end && j+mr <= g.Wo && x0 >= 0 &&
		(j+mr-1)*g.Stride[1]-g.Pad[1]+g.Kw <= g.W && y0+g.Kh > 0 && y0 < g.H
}

// patches returns room for the im2col rows of n pixels, rounded up to
// whole tiles with the rows past n zero.
func (b *convRowsBuf) patches(n, K int) []float32 {
	rows := (n + 11) / 12 * 12
	b.rows = grow(b.rows, rows*K)
	clear(b.rows[n*K : rows*K])
	return b.rows
}

// rowsFilters is the filters' panels for convRows: the packed form w
// keeps (PackConvFilters), or one packed for this call from wv into a
// pooled buffer that put returns.
type rowsFilters struct {
	s    []float32
	pool *[]float32
}

// scratch32 pools float32 buffers that live for one call: filters or an
// operand packed for it, a convolution's subsampled or padded input.
var scratch32 = sync.Pool{New: func() any { return new([]float32) }}

// rowsPanels returns w's filters (Co of K values, in wv) as convRows
// reads them.
func (b *Backend) rowsPanels(w *kernels.Tensor, wv []float32, Co, K int) rowsFilters {
	if f := packedOf(w, 1, K); f != nil {
		return rowsFilters{s: f.panels}
	}
	buf := scratch32.Get().(*[]float32)
	*buf = grow(*buf, (Co+31)/32*32*K)
	packPanels(*buf, wv, 1, Co, K, K, 32)
	return rowsFilters{s: *buf, pool: buf}
}

// put returns a buffer packed for one call to the pool.
func (f rowsFilters) put() {
	if f.pool != nil {
		scratch32.Put(f.pool)
	}
}

// subsampled is a 1×1 unpadded convolution of stride over 1 as the
// pointwise convolution it is: the pixels its windows read, copied in
// order into buf, and the geometry of a stride-1 convolution over them,
// which convRows reads in whole tiles of twelve in place.
func subsampled(buf *[]float32, xv []float32, g kernels.ConvDims) ([]float32, kernels.ConvDims) {
	Ci := g.Ci
	*buf = grow(*buf, g.M()*Ci)
	sub := (*buf)[:g.M()*Ci]
	parallelFor(g.N*g.Ho, g.Wo*Ci, func(lo, hi int) {
		for row := lo; row < hi; row++ {
			n, i := row/g.Ho, row%g.Ho
			src := xv[(n*g.H+i*g.Stride[0])*g.W*Ci:]
			dst := sub[row*g.Wo*Ci:]
			for j := range g.Wo {
				copy(dst[j*Ci:(j+1)*Ci], src[j*g.Stride[1]*Ci:])
			}
		}
	})
	g.H, g.W, g.Stride = g.Ho, g.Wo, [2]int{1, 1}
	return sub, g
}

// convRowsPadCi is the most input channels for which convRows multiplies
// a padded convolution over a copy of x with its padding written out:
// an image's stem (three channels, a 7×7 window) packs a seventh of its
// pixels at the image's edges, each in many short runs, which costs more
// than the copy; wider layers pack a cheaper share.
const convRowsPadCi = 4

// padded is a padded convolution as the unpadded one it is over x with
// its zero padding written out: x copied into buf with Pad rows above and
// below each image and Pad columns on both sides of each row, and the
// geometry over that copy, whose tiles convRows reads in place up to the
// image's edges.
func padded(buf *[]float32, xv []float32, g kernels.ConvDims) ([]float32, kernels.ConvDims) {
	Ci, ph, pw := g.Ci, g.Pad[0], g.Pad[1]
	Hp, Wp := g.H+2*ph, g.W+2*pw
	*buf = grow(*buf, g.N*Hp*Wp*Ci)
	pad := (*buf)[:g.N*Hp*Wp*Ci]
	parallelFor(g.N*Hp, Wp*Ci, func(lo, hi int) {
		for row := lo; row < hi; row++ {
			n, y := row/Hp, row%Hp-ph
			dst := pad[row*Wp*Ci : (row+1)*Wp*Ci]
			if y < 0 || y >= g.H {
				clear(dst)
				continue
			}
			clear(dst[:pw*Ci])
			copy(dst[pw*Ci:], xv[(n*g.H+y)*g.W*Ci:(n*g.H+y+1)*g.W*Ci])
			clear(dst[(pw+g.W)*Ci:])
		}
	})
	g.H, g.W, g.Pad = Hp, Wp, [2]int{}
	return pad, g
}

// nextRows hands the calls of the in-place kernel over one run's panels
// their parts of next to prefetch: calls parts spread evenly over next,
// each at most what a call over k steps asks for (two 64-byte lines every
// four steps), overlapping where the calls could ask for more than next
// holds.
type nextRows struct {
	next     []float32
	calls, k int
	i        int // the calls handed their part so far
}

// part is the next call's part, or nil once next is covered (at once
// for no next, the zero nextRows among them).
func (n *nextRows) part() *float32 {
	if len(n.next) == 0 {
		return nil
	}
	share := min(n.k*8, (len(n.next)+n.calls-1)/max(1, n.calls))
	off := n.i * share
	n.i++
	if off >= len(n.next) {
		return nil
	}
	return &n.next[off]
}
