package cpu

import (
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/cpu/internal/vecmath"
)

var _ kernels.Vision = (*Backend)(nil)

// convPackFloats bounds the im2col rows one worker packs at a time, in
// float32 values (4 MiB): the implicit GEMM never materialises the whole
// [N·Ho·Wo, K] matrix, only a slab of rows that stays in the cache while
// the GEMM reads it.
const convPackFloats = 1 << 20

// narrowGroup is the widest group (output channels per group) that the
// direct loop handles; wider groups are GEMMs over packed rows.
const narrowGroup = 8

// Conv2D computes the convolution as an implicit GEMM over NHWC data: out
// [M, Co] (M = N·Ho·Wo output pixels) = im2col(x) [M, K] · wᵀ [K, Co] per
// group, with K = Kh·Kw·Ci/G. Depthwise and narrow groups are dot products
// per pixel. On our own SGEMM, every other convolution is convGEMM, which
// packs im2col rows straight into the micro-kernel's panels; on a loaded
// engine, a 1×1 stride-1 convolution is MatMul on x itself (see pointwise)
// and any other multiplies slabs of im2col rows, packed in parallel, each
// worker with its own buffer. The residual is copied into out first and
// the product accumulated onto it (beta 1), so out may be the residual;
// bias and activation follow on each block of rows while it is in cache.
// On the in-place kernel, a strided 1×1 convolution multiplies the pixels
// it reads, copied out in order, as a pointwise one (subsampled), an
// image's stem multiplies a copy of x with its padding written out
// (padded), and a 3×3 stride-1 convolution of packed filters, wide
// enough images and channels in multiples of 16 runs as Winograd's
// F(2×2, 3×3) (convWinograd).
func (b *Backend) Conv2D(out, x, w *kernels.Tensor, p kernels.ConvParams) error {
	g, err := check.Conv2D("cpu: Conv2D", b, out, x, w, p)
	if err != nil {
		return err
	}
	M, K, Co := g.M(), g.K(), g.Co
	inPlace := p.Residual != nil && p.Residual.Storage() == out.Storage()
	if g.PointwiseGEMM() && !ownSGEMM() {
		return b.pointwise(out, x, w, g, p, inPlace)
	}
	xv := in32(x)[:x.Len()]
	wv := in32(w)[:w.Len()]
	ov, done := out32(out, inPlace)
	ov = ov[:out.Len()]
	var bias []float32
	if p.Bias != nil {
		bias = in32(p.Bias)[:Co]
	}
	cog := Co / g.Groups
	if cog > narrowGroup && rowsConv(g.Groups) {
		// In place, the residual is out's values, which ov already holds.
		var res []float32
		switch {
		case inPlace:
			res = ov
		case p.Residual != nil:
			res = in32(p.Residual)[:len(ov)]
		}
		if winoConv(g) {
			if u := b.winoPanels(w, wv, Co, g.Ci); u != nil {
				convWinograd(ov, xv, u, res, bias, g, p.Act)
				done()
				return nil
			}
		}
		panels := b.rowsPanels(w, wv, Co, K)
		var recast func(buf *[]float32, xv []float32, g kernels.ConvDims) ([]float32, kernels.ConvDims)
		switch {
		case g.Kh == 1 && g.Kw == 1 && g.Pad == [2]int{} && g.Stride != [2]int{1, 1}:
			recast = subsampled
		case g.Ci <= convRowsPadCi && g.Pad != [2]int{}:
			recast = padded
		}
		if recast != nil {
			buf := scratch32.Get().(*[]float32)
			defer scratch32.Put(buf)
			xv, g = recast(buf, xv, g)
		}
		convRows(ov, xv, panels.s, res, bias, g, p.Act)
		panels.put()
		done()
		return nil
	}
	beta := float32(0)
	if p.Residual != nil {
		beta = 1
		if !inPlace {
			rv := in32(p.Residual)
			parallelFor(len(ov), 1, func(lo, hi int) { copy(ov[lo:hi], rv[lo:hi]) })
		}
	}
	epilogue := func(lo, hi int) { biasAct(ov[lo*Co:hi*Co], Co, bias, p.Act) }

	switch {
	case cog <= narrowGroup:
		// Depthwise and narrow groups: per pixel and group, a packed
		// patch dotted with each of the group's filters.
		parallelFor(M, Co*K, func(lo, hi int) {
			patch := make([]float32, K)
			for r := lo; r < hi; r++ {
				row := ov[r*Co : (r+1)*Co]
				for gr := range g.Groups {
					packPatch(patch, xv, g, r, gr, 0, K)
					for o := gr * cog; o < (gr+1)*cog; o++ {
						filt := wv[o*K : (o+1)*K]
						var s float32
						for i, v := range patch {
							s += v * filt[i]
						}
						if beta != 0 {
							s += row[o]
						}
						row[o] = s
					}
				}
			}
			epilogue(lo, hi)
		})
	case ownSGEMM():
		convGEMM(ov, xv, wv, packedOf(w, g.Groups, sgemmKC), bias, g, beta, p.Act)
	default:
		slab := max(16, min(512, convPackFloats/K))
		slabs := (M + slab - 1) / slab
		// Each worker packs and multiplies its own slabs; the products
		// are small enough that the BLAS runs them on the calling
		// goroutine.
		next := make(chan int, slabs)
		for s := range slabs {
			next <- s
		}
		close(next)
		var wg sync.WaitGroup
		for range min(runtime.GOMAXPROCS(0), slabs) {
			wg.Go(func() {
				buf := make([]float32, slab*K)
				for s := range next {
					r0, r1 := s*slab, min((s+1)*slab, M)
					a := buf[:(r1-r0)*K]
					for gr := range g.Groups {
						for r := r0; r < r1; r++ {
							packPatch(a[(r-r0)*K:(r-r0+1)*K], xv, g, r, gr, 0, K)
						}
						blas32.Gemm(blas.NoTrans, blas.Trans, 1,
							blas32.General{Rows: r1 - r0, Cols: K, Stride: K, Data: a},
							blas32.General{Rows: cog, Cols: K, Stride: K, Data: wv[gr*cog*K : (gr+1)*cog*K]},
							beta,
							blas32.General{Rows: r1 - r0, Cols: cog, Stride: Co, Data: ov[r0*Co+gr*cog:]})
					}
					epilogue(r0, r1)
				}
			})
		}
		wg.Wait()
	}
	done()
	return nil
}

// pointwise is Conv2D of a 1×1 stride-1 convolution: MatMul of the
// [N·H·W, Ci] data as stored by the [Co, Ci] filters, transposed, with the
// bias and activation in its epilogue and the residual, copied into out
// first, as beta·out.
func (b *Backend) pointwise(out, x, w *kernels.Tensor, g kernels.ConvDims, p kernels.ConvParams, inPlace bool) error {
	mp := kernels.MatMulParams{TransB: true, Bias: p.Bias, Act: p.Act, TF32: p.TF32}
	if p.Residual != nil {
		mp.Beta = 1
		if !inPlace {
			copy(bytesOf(out)[:out.Bytes()], bytesOf(p.Residual)[:out.Bytes()])
		}
	}
	o, err := out.Reshape(g.M(), g.Co)
	if err != nil {
		return err
	}
	a, err := x.Reshape(g.M(), g.Ci)
	if err != nil {
		return err
	}
	f, err := w.Reshape(g.Co, g.Ci)
	if err != nil {
		return err
	}
	return b.MatMul(o, a, f, mp)
}

// packPatch writes into dst (k1−k0 values) columns k0:k1 of the im2col
// row of output pixel r (n, i, j in row-major order) for group gr, whose K
// = Kh·Kw·Ci/G columns are Kh·Kw runs of the group's channels, zeros
// where the window leaves the image. With one group and no dilation, a
// window row inside the image is one run of Kw·Ci values in x, copied at
// once (the stem's 3-channel runs).
func packPatch[T float32 | int8](dst, x []T, g kernels.ConvDims, r, gr, k0, k1 int) {
	cg := g.Ci / g.Groups
	j := r % g.Wo
	i := (r / g.Wo) % g.Ho
	n := r / (g.Wo * g.Ho)
	y0, x0 := i*g.Stride[0]-g.Pad[0], j*g.Stride[1]-g.Pad[1]
	rowRun := g.Groups == 1 && g.Dilation[1] == 1 && x0 >= 0 && x0+g.Kw <= g.W
	rowLen := g.Kw * cg // columns per window row
	dst = dst[:k1-k0]
	for k := k0; k < k1; {
		kh, rest := k/rowLen, k%rowLen
		y := y0 + kh*g.Dilation[0]
		if y < 0 || y >= g.H || rowRun {
			end := min(k1, (kh+1)*rowLen)
			if y < 0 || y >= g.H {
				clear(dst[k-k0 : end-k0])
			} else {
				at := ((n*g.H+y)*g.W+x0)*g.Ci + rest
				copy(dst[k-k0:end-k0], x[at:at+end-k])
			}
			k = end
			continue
		}
		kw, c := rest/cg, rest%cg
		end := min(k1, k+cg-c)
		if xx := x0 + kw*g.Dilation[1]; xx < 0 || xx >= g.W {
			clear(dst[k-k0 : end-k0])
		} else {
			at := ((n*g.H+y)*g.W+xx)*g.Ci + gr*cg + c
			copy(dst[k-k0:end-k0], x[at:at+end-k])
		}
		k = end
	}
}

// MaxPool2D takes each window's largest value, a NaN if the window holds
// one (Go's max propagates NaN), in parallel over output rows. The window
// is taken in two passes: the maximum over its rows at every pixel of the
// input row (whole rows at a time), then over its columns at each output
// pixel, those whose windows lie inside the row in one call
// (vecmath.MaxWindows).
func (b *Backend) MaxPool2D(out, x *kernels.Tensor, p kernels.PoolParams) error {
	g, err := check.MaxPool2D("cpu: MaxPool2D", b, out, x, p)
	if err != nil {
		return err
	}
	xv := in32(x)
	ov, done := out32(out, false)
	C, rowLen := g.C, g.W*g.C
	inf := float32(math.Inf(-1))
	// Output pixels lo:hi have their windows inside the row's columns.
	lo := (g.Pad[1] + g.Stride[1] - 1) / g.Stride[1]
	hi := 0
	if last := g.W - 1 + g.Pad[1] - (g.Kernel[1]-1)*g.Dilation[1]; last >= 0 {
		hi = min(g.Wo, last/g.Stride[1]+1)
	}
	parallelFor(g.N*g.Ho, rowLen*g.Kernel[0]+g.Wo*C*g.Kernel[1], func(r0, r1 int) {
		cols := make([]float32, rowLen) // the window's rows' maximum at each pixel of an input row
		for r := r0; r < r1; r++ {
			n, i := r/g.Ho, r%g.Ho
			dst := ov[(n*g.Ho+i)*g.Wo*C:][:g.Wo*C]
			y0 := i*g.Stride[0] - g.Pad[0]
			if maxTaps(cols, g.Kernel[0], y0, g.Dilation[0], g.H, func(y int) []float32 { return xv[(n*g.H+y)*rowLen:][:rowLen] }) == 0 {
				for c := range dst { // every window of the row wholly in the padding
					dst[c] = inf
				}
				continue
			}
			if useVecmath && lo < hi {
				poolPixels(dst, cols, g, 0, lo)
				vecmath.MaxWindows(dst[lo*C:hi*C], cols[(lo*g.Stride[1]-g.Pad[1])*C:], C, hi-lo,
					g.Stride[1]*C, g.Kernel[1], g.Dilation[1]*C)
				poolPixels(dst, cols, g, hi, g.Wo)
				continue
			}
			poolPixels(dst, cols, g, 0, g.Wo)
		}
	})
	done()
	return nil
}

// poolPixels sets output pixels j0:j1 of one output row, dst, to the
// maximum over each one's window of cols, the maximum over the window's
// rows at each input pixel: the taps inside the image, or −Inf for a
// window wholly in the padding.
func poolPixels(dst, cols []float32, g kernels.PoolDims, j0, j1 int) {
	C := g.C
	for j := j0; j < j1; j++ {
		px := dst[j*C : (j+1)*C]
		x0 := j*g.Stride[1] - g.Pad[1]
		if maxTaps(px, g.Kernel[1], x0, g.Dilation[1], g.W, func(x int) []float32 { return cols[x*C : (x+1)*C] }) == 0 {
			for c := range px { // a window wholly in the padding
				px[c] = float32(math.Inf(-1))
			}
		}
	}
}

// maxTaps sets dst to the maximum of row(p) over a window's taps p = p0 +
// t·dil, t < taps, that lie in [0, size), and returns how many did.
func maxTaps(dst []float32, taps, p0, dil, size int, row func(p int) []float32) int {
	taken := 0
	for t := range taps {
		p := p0 + t*dil
		if p < 0 || p >= size {
			continue
		}
		if src := row(p); taken == 0 {
			copy(dst, src)
		} else {
			maxRow(dst, dst, src)
		}
		taken++
	}
	return taken
}

// maxRow sets dst[c] = max(a[c], b[c]) as Go's max: a NaN wins and
// stays, as in torch; dst may be a or b.
func maxRow(dst, a, b []float32) {
	if useVecmath {
		vecmath.MaxOf(dst, a, b)
		return
	}
	a, b = a[:len(dst)], b[:len(dst)]
	for c := range dst {
		dst[c] = max(a[c], b[c])
	}
}

// avgPoolChannels is how many channels one task of GlobalAvgPool sums: a
// late layer's 2,048 channels of one image split between two workers.
const avgPoolChannels = 512

// GlobalAvgPool averages each image's channels over its pixels, in
// float32, pixel after pixel, in parallel over images and blocks of
// avgPoolChannels channels.
func (b *Backend) GlobalAvgPool(out, x *kernels.Tensor) error {
	n, hw, C, err := check.GlobalAvgPool("cpu: GlobalAvgPool", b, out, x)
	if err != nil {
		return err
	}
	xv := in32(x)
	ov, done := out32(out, false)
	blocks := (C + avgPoolChannels - 1) / avgPoolChannels
	parallelFor(n*blocks, hw*min(C, avgPoolChannels), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			im, c0 := t/blocks, t%blocks*avgPoolChannels
			c1 := min(C, c0+avgPoolChannels)
			acc := ov[im*C+c0 : im*C+c1]
			clear(acc)
			for px := range hw {
				addRow(acc, acc, xv[(im*hw+px)*C+c0:])
			}
			for c := range acc {
				acc[c] /= float32(hw)
			}
		}
	})
	done()
	return nil
}
