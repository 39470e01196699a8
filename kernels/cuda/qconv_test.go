//go:build cuda

package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/kerneltest"
)

// qconvOuts are the out dtypes of QConv2D.
var qconvOuts = []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.I8, kernels.I32}

// qconvCase is one QConv2D call of the dry runs: x I8 [N, H, W, Ci], w I8
// [Co, Kh, Kw, Ci/groups], with a bias and a residual (separate or out
// itself) when asked and the out dtype allows them.
type qconvCase struct {
	name                     string
	n, h, w, ci, co, kh, kw  int
	stride, pad, dil, groups int
	bias, residual, inPlace  bool
	act                      kernels.Activation
}

// qconvCases take every path of QConv2D: the pointwise GEMM on the image
// as stored (with a separate residual and with out as its residual), the
// patches gathered in 16-, 4- and 1-byte chunks, K a multiple of 16 or
// not (tensor cores or the register-staged kernel), grouped and depthwise
// convolutions, and few output pixels (the GEMV kernel).
var qconvCases = []qconvCase{
	{name: "pointwise", n: 2, h: 4, w: 4, ci: 32, co: 64, kh: 1, kw: 1, bias: true, residual: true, act: kernels.ActReLU},
	{name: "pointwise-inplace", n: 2, h: 4, w: 4, ci: 64, co: 64, kh: 1, kw: 1, residual: true, inPlace: true},
	{name: "3x3", n: 2, h: 8, w: 8, ci: 32, co: 128, kh: 3, kw: 3, pad: 1, bias: true, residual: true, act: kernels.ActReLU},
	{name: "3x3-stride2-ci12", n: 2, h: 9, w: 9, ci: 12, co: 40, kh: 3, kw: 3, stride: 2, pad: 1, act: kernels.ActGELU},
	{name: "1x1-stride2", n: 2, h: 8, w: 8, ci: 64, co: 256, kh: 1, kw: 1, stride: 2, bias: true},
	{name: "grouped", n: 1, h: 6, w: 6, ci: 64, co: 64, kh: 3, kw: 3, pad: 1, groups: 2, bias: true, residual: true, inPlace: true},
	{name: "dilated-5x3", n: 1, h: 10, w: 10, ci: 16, co: 48, kh: 5, kw: 3, pad: 2, dil: 2},
	{name: "stem-3ch", n: 2, h: 16, w: 16, ci: 3, co: 64, kh: 7, kw: 7, stride: 2, pad: 3, bias: true, act: kernels.ActReLU},
	{name: "depthwise", n: 2, h: 8, w: 8, ci: 32, co: 32, kh: 3, kw: 3, pad: 1, groups: 32, bias: true, residual: true},
	{name: "few-pixels", n: 1, h: 2, w: 3, ci: 16, co: 9, kh: 3, kw: 3, pad: 1, residual: true},
}

// geometry is the case's ConvDims, as CheckQConv2D resolves them.
func (c qconvCase) geometry() kernels.ConvDims {
	p := kernels.QConvParams{Stride: [2]int{c.stride, c.stride}, Pad: [2]int{c.pad, c.pad}, Dilation: [2]int{c.dil, c.dil}, Groups: c.groups}
	return p.Conv().Dims(kernels.Shape{c.n, c.h, c.w, c.ci}, kernels.Shape{c.co, c.kh, c.kw, c.ci / max(c.groups, 1)})
}

// qconvCall is a case's tensors and parameters for one out dtype.
type qconvCall struct {
	out, x, w *kernels.Tensor
	p         kernels.QConvParams
}

// call makes the case's tensors with alloc and its parameters for out
// dtype dt: no epilogue for I32; per-tensor XScale, per-channel WScale,
// bias and activation as asked, and OutScale for I8; and the residual as
// asked for a float out.
func (c qconvCase) call(dt kernels.DType, alloc func(dt kernels.DType, shape ...int) *kernels.Tensor) qconvCall {
	g := c.geometry()
	p := kernels.QConvParams{Stride: [2]int{c.stride, c.stride}, Pad: [2]int{c.pad, c.pad}, Dilation: [2]int{c.dil, c.dil}, Groups: c.groups}
	k := qconvCall{
		x: alloc(kernels.I8, c.n, c.h, c.w, c.ci), w: alloc(kernels.I8, c.co, c.kh, c.kw, c.ci/g.Groups),
		out: alloc(dt, c.n, g.Ho, g.Wo, c.co),
	}
	if dt != kernels.I32 {
		p.XScale, p.WScale, p.Act = alloc(kernels.F32, 1), alloc(kernels.F32, c.co), c.act
		if c.bias {
			p.Bias = alloc(kernels.F32, c.co)
		}
	}
	switch {
	case dt == kernels.I8:
		p.OutScale = alloc(kernels.F32, 1)
	case dt != kernels.I32 && c.inPlace:
		p.Residual = k.out
	case dt != kernels.I32 && c.residual:
		p.Residual = alloc(dt, c.n, g.Ho, g.Wo, c.co)
	}
	k.p = p
	return k
}

// run calls QConv2D for the case with out of dtype dt on b.
func (c qconvCase) run(t *testing.T, b *Backend, dt kernels.DType) (qconvCall, error) {
	t.Helper()
	k := c.call(dt, func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	})
	return k, b.QConv2D(k.out, k.x, k.w, k.p)
}

// dryQuantConv calls QConv2D on every path (qconvCases) into every out
// dtype.
func dryQuantConv(t *testing.T, b *Backend) {
	for _, dt := range qconvOuts {
		for _, c := range qconvCases {
			_, err := c.run(t, b, dt)
			require.NoError(t, err, "%v %s", dt, c.name)
		}
	}
}

// quantConvMust names the kernels that dryQuantConv must launch beyond
// quantMust's (TestLaunchSignatures checks them all).
func quantConvMust(int) []string { return []string{"qconv_im2col"} }

// wantQMM is the QMatMul kernel (without the dtype) that a product of m
// rows and reduction k with operands at a and w runs at compute
// capability major.
func wantQMM(major, m, k int, a, w devptr) string {
	switch {
	case m <= qmmGEMVRows:
		return "qmatmul_gemv"
	case major >= 8 && k%16 == 0 && a%16 == 0 && w%16 == 0:
		return "qmatmul_tc"
	}
	return "qmatmul_mma"
}

// TestQConvPaths checks the launches of each case of qconvCases on each
// image target and out dtype: the path, the patch kernel's arguments and
// chunk width, and for each group the QMatMul kernel, its geometry, and
// the addresses of its operands: the group's filters, scales, bias,
// output channels and residual, and the row pitch Co.
func TestQConvPaths(t *testing.T) {
	wantVec := map[string]int{"pointwise": 0, "pointwise-inplace": 0, "3x3": 16, "3x3-stride2-ci12": 4, "1x1-stride2": 16,
		"grouped": 16, "dilated-5x3": 16, "stem-3ch": 1, "depthwise": 1, "few-pixels": 16}
	for _, cc := range [][2]int{{7, 5}, {8, 0}, {9, 0}} {
		for _, dt := range qconvOuts {
			for _, c := range qconvCases {
				t.Run(fmt.Sprintf("cc=%d.%d/%v/%s", cc[0], cc[1], dt, c.name), func(t *testing.T) {
					var recs []launchRec
					b := dryRun(cc[0], cc[1], &recs)
					k, err := c.run(t, b, dt)
					require.NoError(t, err)
					g := c.geometry()
					m, kk, cg, cog := g.M(), g.K(), g.Ci/g.Groups, g.Co/g.Groups
					pointwise := wantVec[c.name] == 0
					assert.Equal(t, pointwise, chooseQConv(g) == qconvGEMM, "path")
					per := 1 + boolInt(!pointwise)
					require.Len(t, recs, per*g.Groups, "one slab: per group, the patches and a product")
					es := devptr(dt.Size())
					for gr := range g.Groups {
						a := ptrOf(k.x)
						if !pointwise {
							im := recs[per*gr]
							require.Equal(t, "qconv_im2col", im.name)
							assert.Equal(t, dim3{min(ceilDiv(m*kk/wantVec[c.name], block), 32*132), 1, 1}, im.grid)
							assert.Equal(t, dim3{block, 1, 1}, im.block)
							require.Len(t, im.args, 20)
							a = im.args[0].(devptr)
							assert.Equal(t, b.work.cur, a, "the patches are in the workspace")
							assert.Equal(t, ptrOf(k.x), im.args[1])
							assert.Equal(t, []any{int32(0), int32(m), int32(gr), int32(g.H), int32(g.W), int32(g.Ci), int32(g.Ho), int32(g.Wo),
								int32(g.Kh), int32(g.Kw), int32(g.Stride[0]), int32(g.Stride[1]), int32(g.Pad[0]), int32(g.Pad[1]),
								int32(g.Dilation[0]), int32(g.Dilation[1]), int32(cg), int32(wantVec[c.name])}, im.args[2:])
						}
						r := recs[per*gr+per-1]
						w := ptrOf(k.w) + devptr(gr*cog*kk)
						want := wantQMM(cc[0], m, kk, a, w)
						assert.Equal(t, want+"_"+dt.String(), r.name)
						switch want {
						case "qmatmul_gemv":
							assert.Equal(t, dim3{ceilDiv(cog, 8), 1, 1}, r.grid)
						default:
							assert.Equal(t, dim3{ceilDiv(cog, 128), ceilDiv(m, 128), 1}, r.grid)
						}
						require.Len(t, r.args, 15)
						at := devptr(gr*cog) * es
						assert.Equal(t, ptrOf(k.out)+at, r.args[0], "out: the group's channels")
						assert.Equal(t, []any{a, w}, r.args[1:3], "patches, the group's filters")
						assert.Equal(t, []any{int32(m), int32(cog), int32(kk), int32(g.Co)}, r.args[8:12], "M, N, K, ldc")
						var res, bias, bscale devptr
						if k.p.Residual != nil {
							res = ptrOf(k.p.Residual) + at
						}
						if k.p.Bias != nil {
							bias = ptrOf(k.p.Bias) + devptr(4*gr*cog)
						}
						if k.p.WScale != nil {
							bscale = ptrOf(k.p.WScale) + devptr(4*gr*cog)
						}
						assert.Equal(t, []any{ptrOf(k.p.XScale), bscale, bias, ptrOf(k.p.OutScale), res}, r.args[3:8],
							"XScale, WScale, bias, OutScale, residual")
						assert.Equal(t, []any{int32(0), int32(boolInt(dt != kernels.I32)), int32(k.p.Act)}, r.args[12:],
							"per-tensor XScale, per-channel WScale, activation")
						if k.p.Residual != nil && c.inPlace {
							assert.Equal(t, r.args[0], r.args[7], "the residual is out")
						}
					}
				})
			}
		}
	}
}

// TestQConvSlabRows checks the slabs of output pixels: whole 128-row
// tiles within the scratch bound, one tile at least, all the pixels when
// they fit, and never more than one QMatMul launch takes.
func TestQConvSlabRows(t *testing.T) {
	for _, c := range []struct {
		path    qconvPath
		m, k    int
		want    int
		comment string
	}{
		{qconvIm2col, 3136, 576, 3136, "ResNet-50's 3×3 at 56×56, batch 1: one slab"},
		{qconvIm2col, 512 * 3136, 576, 58240, "batch 512: 32 MiB of patches, whole tiles"},
		{qconvIm2col, 1000, kernels.QConvMaxK, 256, "the longest K"},
		{qconvIm2col, 100000, 300000, 128, "one tile at least"},
		{qconvIm2col, 1 << 30, 1, qmmTile * maxGridY, "one launch's rows"},
		{qconvGEMM, 1 << 30, 64, qmmTile * maxGridY, "pointwise: one launch's rows"},
		{qconvGEMM, 50176, 2048, 50176, "pointwise: no scratch bound"},
	} {
		assert.Equal(t, c.want, qconvSlabRows(c.path, c.m, c.k), c.comment)
	}
	for _, c := range []struct {
		cg   int
		x    devptr
		want int
	}{{64, 256, 16}, {64, 260, 4}, {64, 257, 1}, {12, 256, 4}, {3, 256, 1}, {48, 4096, 16}, {6, 256, 1}} {
		assert.Equal(t, c.want, qconvVec(c.cg, c.x), "%d channels at %#x", c.cg, c.x)
	}
}

// TestQConvErrors checks that bad calls fail before any launch, with
// errors naming the op.
func TestQConvErrors(t *testing.T) {
	var recs []launchRec
	b := dryRun(8, 0, &recs)
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	f32, i8 := kernels.F32, kernels.I8
	err := b.QConv2D(a(f32, 1, 4, 4, 4), a(i8, 1, 6, 6, 8), a(i8, 4, 3, 3, 8), kernels.QConvParams{XScale: a(f32, 1)})
	require.ErrorIs(t, err, kernels.ErrValue)
	assert.Contains(t, err.Error(), "cuda: QConv2D")
	err = b.QConv2D(a(f32, 1, 5, 5, 4), a(i8, 1, 6, 6, 8), a(i8, 4, 3, 3, 8), kernels.QConvParams{XScale: a(f32, 1), WScale: a(f32, 4)})
	require.ErrorIs(t, err, kernels.ErrShape)
	assert.Empty(t, recs, "no launch for a bad call")
}

// devMem is host memory standing in for device memory at chosen
// addresses, for replaying recorded launches.
type devMem struct {
	next    devptr
	regions []memRegion
}

type memRegion struct {
	base devptr
	data []byte
}

// alloc returns n bytes at a fresh address, 4096 bytes apart from the
// previous region.
func (d *devMem) alloc(n int) devptr {
	p := d.next
	d.regions = append(d.regions, memRegion{p, make([]byte, n)})
	d.next += devptr((n + 8191) &^ 4095)
	return p
}

// at returns the bytes from address p to the end of its region.
func (d *devMem) at(t *testing.T, p devptr) []byte {
	for _, r := range d.regions {
		if p >= r.base && p <= r.base+devptr(len(r.data)) {
			return r.data[p-r.base:]
		}
	}
	require.Failf(t, "address outside every region", "%#x", p)
	return nil
}

func (d *devMem) f32(t *testing.T, p devptr, i int64) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(d.at(t, p)[4*i:]))
}

// replay runs recorded qconv_im2col and qmatmul_*_i32 and _f32 launches
// on d as their kernels' comments in qconv.cu and quant.cu specify them
// (the activation ReLU or none), checking the alignment each assumes.
func (d *devMem) replay(t *testing.T, recs []launchRec) {
	for _, r := range recs {
		arg := func(i int) int64 {
			switch v := r.args[i].(type) {
			case int32:
				return int64(v)
			case devptr:
				return int64(v)
			}
			require.Failf(t, "argument type", "%s argument %d: %T", r.name, i, r.args[i])
			return 0
		}
		if r.name == "qconv_im2col" {
			col, x := r.args[0].(devptr), r.args[1].(devptr)
			p0, rows, group := arg(2), arg(3), arg(4)
			H, W, Ci, Ho, Wo, Kh, Kw := arg(5), arg(6), arg(7), arg(8), arg(9), arg(10), arg(11)
			sh, sw, ph, pw, dh, dw, cg, vec := arg(12), arg(13), arg(14), arg(15), arg(16), arg(17), arg(18), arg(19)
			require.Zero(t, cg%vec, "chunks of %d bytes in groups of %d channels", vec, cg)
			require.Zero(t, int64(x)%vec, "x aligned to the chunk")
			require.Zero(t, int64(col)%vec, "the patches aligned to the chunk")
			K := Kh * Kw * cg
			dst, src := d.at(t, col), d.at(t, x)
			for r := range rows {
				p := p0 + r
				n, i, j := p/(Ho*Wo), p/Wo%Ho, p%Wo
				for kh := range Kh {
					for kw := range Kw {
						y, xx := i*sh-ph+kh*dh, j*sw-pw+kw*dw
						for c := range cg {
							var v byte
							if y >= 0 && y < H && xx >= 0 && xx < W {
								v = src[((n*H+y)*W+xx)*Ci+group*cg+c]
							}
							dst[r*K+(kh*Kw+kw)*cg+c] = v
						}
					}
				}
			}
			continue
		}
		require.True(t, strings.HasPrefix(r.name, "qmatmul_"), r.name)
		c, a, b := r.args[0].(devptr), r.args[1].(devptr), r.args[2].(devptr)
		as, bs, bias, res := r.args[3].(devptr), r.args[4].(devptr), r.args[5].(devptr), r.args[7].(devptr)
		M, N, K, ldc, apr, bpr, act := arg(8), arg(9), arg(10), arg(11), arg(12), arg(13), arg(14)
		require.GreaterOrEqual(t, ldc, N)
		out, av, bv := d.at(t, c), d.at(t, a), d.at(t, b)
		for m := range M {
			for n := range N {
				var acc int32
				ar, br := av[m*K:][:K], bv[n*K:][:K]
				for k, x := range ar {
					acc += int32(int8(x)) * int32(int8(br[k]))
				}
				o := m*ldc + n
				switch {
				case strings.HasSuffix(r.name, "_i32"):
					binary.LittleEndian.PutUint32(out[4*o:], uint32(acc))
				case strings.HasSuffix(r.name, "_f32"):
					sa, sb := d.f32(t, as, m*apr), d.f32(t, bs, n*bpr)
					v := float32(acc) * float32(sa*sb)
					if bias != 0 {
						v = float32(v + d.f32(t, bias, n))
					}
					if res != 0 {
						v = float32(v + d.f32(t, res, o))
					}
					if act == int64(kernels.ActReLU) {
						v = max(v, 0)
					}
					binary.LittleEndian.PutUint32(out[4*o:], math.Float32bits(v))
				default:
					require.Failf(t, "no replay", "of %s", r.name)
				}
			}
		}
	}
}

// TestQConvReplay runs QConv2D's recorded launches on the host as their
// kernels specify them and compares the result with kerneltest's
// reference convolution: exact int32 sums for an I32 out, and for an F32
// out the epilogue computed in the same float32 operations, so that the
// slabs, groups and the addresses of every operand are checked end to
// end. "slabs" is large enough for three slabs of output pixels (odd
// channels, groups, a separate residual); "slabs-inplace" has two.
func TestQConvReplay(t *testing.T) {
	cases := append([]qconvCase{}, qconvCases...)
	for i := range cases {
		if cases[i].act != kernels.ActReLU {
			cases[i].act = kernels.ActNone
		}
	}
	cases = append(cases,
		qconvCase{name: "slabs", n: 1, h: 30, w: 64, ci: 1338, co: 4, kh: 7, kw: 7, pad: 3, groups: 2, bias: true, residual: true, act: kernels.ActReLU},
		qconvCase{name: "slabs-inplace", n: 1, h: 24, w: 60, ci: 1152, co: 3, kh: 5, kw: 5, stride: 1, pad: 2, residual: true, inPlace: true},
	)
	if testing.Short() {
		cases = cases[:len(cases)-2]
	}
	rng := uint64(1)
	rand := func() uint64 { // splitmix64
		rng += 0x9e3779b97f4a7c15
		z := rng
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	for _, dt := range []kernels.DType{kernels.I32, kernels.F32} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/%s", dt, c.name), func(t *testing.T) {
				var recs []launchRec
				b := dryRun(8, 0, &recs)
				mem := &devMem{next: 1 << 20}
				b.work = arena{cur: mem.alloc(qconvScratchBytes), bytes: qconvScratchBytes}
				fill := map[*kernels.Tensor]bool{}
				k := c.call(dt, func(dt kernels.DType, shape ...int) *kernels.Tensor {
					s := kernels.Shape(shape)
					x := kernels.NewTensor(b, dt, s, &storage{ptr: mem.alloc(s.Len() * dt.Size()), class: -1})
					fill[x] = true
					return x
				})
				delete(fill, k.out)
				// Inputs: int8 in [−128, 127], floats in [−2, 2) on a grid of 1/64.
				for x := range fill {
					data := mem.at(t, ptrOf(x))[:x.Bytes()]
					if x.DType() == kernels.I8 {
						for i := range data {
							data[i] = byte(rand())
						}
						continue
					}
					for i := range x.Len() {
						binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(int(rand()%256)-128)/64))
					}
				}
				var res []float32
				if k.p.Residual != nil {
					res = floats(mem.at(t, ptrOf(k.p.Residual))[:k.p.Residual.Bytes()])
				}
				require.NoError(t, b.QConv2D(k.out, k.x, k.w, k.p))
				mem.replay(t, recs)

				g := c.geometry()
				xv, wv := int8s(mem.at(t, ptrOf(k.x))[:k.x.Bytes()]), int8s(mem.at(t, ptrOf(k.w))[:k.w.Bytes()])
				got := mem.at(t, ptrOf(k.out))[:k.out.Bytes()]
				for i, s := range kerneltest.RefQConv2D(xv, wv, g) {
					o := int64(i % g.Co)
					if dt == kernels.I32 {
						if v := int32(binary.LittleEndian.Uint32(got[4*i:])); int64(v) != s {
							require.Failf(t, "sum differs", "out[%d] (pixel %d, channel %d) = %d, want %d", i, i/g.Co, o, v, s)
						}
						continue
					}
					xs, ws := mem.f32(t, ptrOf(k.p.XScale), 0), mem.f32(t, ptrOf(k.p.WScale), o)
					want := float32(s) * float32(xs*ws)
					if k.p.Bias != nil {
						want = float32(want + mem.f32(t, ptrOf(k.p.Bias), o))
					}
					if res != nil {
						want = float32(want + res[i])
					}
					if c.act == kernels.ActReLU {
						want = max(want, 0)
					}
					if v := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); v != want {
						require.Failf(t, "value differs", "out[%d] (pixel %d, channel %d) = %g, want %g", i, i/g.Co, o, v, want)
					}
				}
				if c.name == "slabs" {
					assert.Len(t, recs, 3*2*2, "three slabs of two groups, each the patches and a product")
				}
				if c.name == "slabs-inplace" {
					assert.Len(t, recs, 2*2, "two slabs, each the patches and a product")
				}
			})
		}
	}
}

func int8s(b []byte) []int8 {
	v := make([]int8, len(b))
	for i, x := range b {
		v[i] = int8(x)
	}
	return v
}

func floats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
