package cpu

import (
	"math"
	"runtime"
	"sync"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu/internal/winograd"
)

// winoMinPixels is the fewest output pixels per image for which a 3×3
// convolution runs as convWinograd: ResNet's last stage, 7×7, is the
// smallest image measured (docs/cpu.md).
const winoMinPixels = 7 * 7

// winoBlockFloats bounds the transformed inputs and products, in float32
// values (512 KiB), of the tiles that a task of convWinograd transforms,
// multiplies and transforms back before it moves to the next tiles.
const winoBlockFloats = 1 << 17

// winoConv reports whether Conv2D of geometry g may run as convWinograd:
// a 3×3 stride-1 convolution of one group without dilation, its channels
// in multiples of 16, on the in-place kernel, over at least winoMinPixels
// output pixels an image. It does where its filters are packed
// (winoPanels): transforming them on every call would cost more than
// the multiplications saved.
func winoConv(g kernels.ConvDims) bool {
	return winograd.Available && rowsConv(g.Groups) && g.Winograd() &&
		g.Ci%16 == 0 && g.Co%16 == 0 && g.Ho*g.Wo >= winoMinPixels
}

// convWinograd is Conv2D of a 3×3 stride-1 convolution as Winograd's
// F(2×2, 3×3): each 2×2 tile of output pixels is Aᵀ[Σ_c U ⊙ V]A, where V =
// Bᵀ d B is the tile's 4×4 window of x transformed (winograd.Input) and
// U = G g Gᵀ the filters transformed (winoPanels): 16 products [tiles, Ci]
// · [Ci, Co], one per position of the transformed tile, on the in-place
// kernel, in place of the window's nine. Tasks (convTasks) split the
// tiles, or the filters where they outnumber the tiles; each transforms
// its tiles a block at a time (winoBlockFloats), multiplies them by its
// filters, and transforms the products back into out with the residual,
// bias and a ReLU (winograd.Output); any other activation follows. A
// window or tile that crosses the image's edge goes through a buffer
// with its padding written out. panels holds U as winoPanels packs it.
func convWinograd(ov, xv, panels, res, bias []float32, g kernels.ConvDims, act kernels.Activation) {
	const mr, nr = 12, 32
	Ci, Co := g.Ci, g.Co
	tiles := g.N * ((g.Ho + 1) / 2) * ((g.Wo + 1) / 2)
	cogP := (Co + nr - 1) / nr * nr
	floor, fused := float32(math.Inf(-1)), act == kernels.ActNone || act == kernels.ActReLU
	if act == kernels.ActReLU {
		floor = 0
	}
	inf := float32(math.Inf(-1))
	tasks := convTasks(1, tiles, Co, mr, nr, runtime.GOMAXPROCS(0), true)
	parallelFor(len(tasks), max(1, tiles/len(tasks)*Co*Ci*4), func(lo, hi int) {
		bufs := winoBufs.Get().(*winoBuf)
		defer winoBufs.Put(bufs)
		for _, t := range tasks[lo:hi] {
			n := t.c1 - t.c0
			nP := (n + nr - 1) / nr * nr
			// Filters that fit the cache are read again for every block of
			// tiles; larger ones, from memory, once for all the task's tiles,
			// each panel prefetched while the panel before it multiplies.
			block, stream := t.r1-t.r0, 16*Ci*nP > winoBlockFloats
			if !stream {
				block = max(mr, winoBlockFloats/(16*(Ci+nP))/mr*mr)
			}
			for b0 := t.r0; b0 < t.r1; b0 += block {
				nt := min(block, t.r1-b0)
				ntP := (nt + mr - 1) / mr * mr
				v, m := bufs.grow(ntP*16*Ci, ntP*16*nP, 16*max(Ci, nP))
				clear(v[nt*16*Ci:])
				for i := range nt {
					winoInput(v[i*16*Ci:(i+1)*16*Ci], xv, g, b0+i, bufs)
				}
				for xi := range 16 {
					for col := t.c0; col < t.c1; col += nr {
						p := panels[xi*Ci*cogP+col*Ci:]
						_ = p[Ci*nr-1]
						var ahead nextRows
						if stream {
							next := xi*Ci*cogP + (col+nr)*Ci
							if col+nr >= t.c1 {
								next = (xi+1)*Ci*cogP + t.c0*Ci
							}
							if next < len(panels) {
								ahead = nextRows{next: panels[next:min(len(panels), next+Ci*nr)], calls: (nt + mr - 1) / mr, k: Ci}
							}
						}
						for r := 0; r < nt; r += mr {
							kern := rowsKernel(nt - r)
							c := &m[(r*16+xi)*nP+col-t.c0]
							kern(Ci, &v[(r*16+xi)*Ci], 16*Ci, 1, Ci, &p[0], c, 16*nP, c, 0, inf, &zeros32[0], ahead.part())
						}
					}
				}
				for i := range nt {
					winoOutput(ov, m[i*16*nP:(i+1)*16*nP], nP, res, bias, g, b0+i, t.c0, n, floor, bufs)
				}
			}
		}
	})
	if !fused {
		parallelFor(g.M(), Co, func(lo, hi int) { applyAct(ov[lo*Co:hi*Co], ov[lo*Co:hi*Co], act) })
	}
}

// winoInput sets v (16 rows of Ci values) to the transformed 4×4 window
// of tile: read in place where it lies inside the image, else copied
// with its padding into bufs.edge first.
func winoInput(v, xv []float32, g kernels.ConvDims, tile int, bufs *winoBuf) {
	Ci := g.Ci
	img, oy, ox := tileAt(g, tile)
	y0, x0 := oy-g.Pad[0], ox-g.Pad[1]
	if y0 >= 0 && x0 >= 0 && y0+4 <= g.H && x0+4 <= g.W {
		at := ((img*g.H+y0)*g.W + x0) * Ci
		_ = xv[at+(3*g.W+4)*Ci-1]
		winograd.Input(Ci, &xv[at], g.W*Ci, Ci, &v[0], Ci)
		return
	}
	d := bufs.edge[:16*Ci]
	clear(d)
	xa, xb := max(x0, 0), min(x0+4, g.W)
	for i := range 4 {
		if y := y0 + i; y >= 0 && y < g.H && xa < xb {
			copy(d[(4*i+xa-x0)*Ci:], xv[((img*g.H+y)*g.W+xa)*Ci:((img*g.H+y)*g.W+xb)*Ci])
		}
	}
	winograd.Input(Ci, &d[0], 4*Ci, Ci, &v[0], Ci)
}

// winoOutput transforms tile's products m (16 rows, nP apart, of n
// channels) back into out's channels c0:c0+n of its 2×2 pixels, with
// the residual, bias and floor: in place where all four pixels lie in
// the image, else through bufs.edge.
func winoOutput(ov, m []float32, nP int, res, bias []float32, g kernels.ConvDims, tile, c0, n int, floor float32, bufs *winoBuf) {
	Co := g.Co
	img, oy, ox := tileAt(g, tile)
	at := ((img*g.Ho+oy)*g.Wo+ox)*Co + c0
	var bp *float32
	if bias != nil {
		bp = &bias[c0]
	}
	_ = m[15*nP+n-1]
	if oy+2 <= g.Ho && ox+2 <= g.Wo {
		_ = ov[at+(g.Wo+1)*Co+n-1]
		var rp *float32
		if res != nil {
			_ = res[at+(g.Wo+1)*Co+n-1]
			rp = &res[at]
		}
		winograd.Output(n, &m[0], nP, &ov[at], g.Wo*Co, Co, rp, bp, floor)
		return
	}
	s := bufs.edge[:4*n]
	var rp *float32
	if res != nil {
		for a := range min(2, g.Ho-oy) {
			for b := range min(2, g.Wo-ox) {
				copy(s[(2*a+b)*n:(2*a+b+1)*n], res[at+(a*g.Wo+b)*Co:])
			}
		}
		rp = &s[0]
	}
	winograd.Output(n, &m[0], nP, &s[0], 2*n, n, rp, bp, floor)
	for a := range min(2, g.Ho-oy) {
		for b := range min(2, g.Wo-ox) {
			copy(ov[at+(a*g.Wo+b)*Co:at+(a*g.Wo+b)*Co+n], s[(2*a+b)*n:])
		}
	}
}

// tileAt is the image of tile and its first output pixel's row and
// column: tiles are numbered image by image, row by row, ⌈Wo/2⌉ a row.
func tileAt(g kernels.ConvDims, tile int) (img, oy, ox int) {
	tw, th := (g.Wo+1)/2, (g.Ho+1)/2
	return tile / (th * tw), 2 * (tile / tw % th), 2 * (tile % tw)
}

// winoBuf is one goroutine's buffers for convWinograd: a block's
// transformed windows and products, and a window or tile at the image's
// edge.
type winoBuf struct {
	v, m, edge []float32
}

var winoBufs = sync.Pool{New: func() any { return new(winoBuf) }}

// grow returns the block's buffers, of nv and nm values, and makes edge
// at least ne values: room for a window (16 rows of Ci) or a tile (4
// pixels of n channels).
func (b *winoBuf) grow(nv, nm, ne int) (v, m []float32) {
	b.v, b.m, b.edge = grow(b.v, nv), grow(b.m, nm), grow(b.edge, ne)
	return b.v[:nv], b.m[:nm]
}

// winoPanels returns the filters of w, a weight with a packed form
// (PackConvFilters; Co of 3×3×Ci values, in wv), transformed
// (winograd.Filter) and packed as convWinograd reads them: for each of
// the 16 positions of a transformed tile, the [Co, Ci] matrix as packedB
// packs a group of Co rows of Ci values in one block. The transform is
// made on the first call and kept with the packed form, which Upload and
// Free drop; it is nil where the pool has no room for it.
func (b *Backend) winoPanels(w *kernels.Tensor, wv []float32, Co, Ci int) []float32 {
	st := w.Storage().(*storage)
	if st.packed == nil {
		return nil
	}
	if f := st.wino.Load(); f != nil {
		return f.panels
	}
	u := make([]float32, 16*Co*Ci)
	winograd.Filter(u, wv, Co, Ci)
	f, err := b.newPacked(u, 16, Co, Ci, Ci, 32)
	if err != nil {
		return nil
	}
	if !st.wino.CompareAndSwap(nil, f) {
		b.pool.Put(f.mem, f.class)
	}
	return st.wino.Load().panels
}
