//go:build cuda

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
)

// convCase is one Conv2D call of the dry runs: x [N, H, W, Ci], w [Co, K,
// K, Ci/groups], with bias and a separate residual when asked.
type convCase struct {
	name                     string
	n, h, w, ci, co, k       int
	stride, pad, dil, groups int
	bias, residual, inPlace  bool
	tf32                     bool
	act                      kernels.Activation
}

// visionCases take every path of Conv2D: the pointwise GEMM (with a
// separate residual and with out as its residual), the tensor-core implicit
// GEMM with both tile widths, grouped on tensor cores, the SIMT implicit
// GEMM (channel counts the tensor cores cannot load, and F32 without TF32),
// and the direct kernel (depthwise, few output channels).
var visionCases = []convCase{
	{name: "pointwise", n: 2, h: 4, w: 4, ci: 32, co: 64, k: 1, bias: true, residual: true, act: kernels.ActReLU},
	{name: "pointwise-inplace", n: 2, h: 4, w: 4, ci: 64, co: 64, k: 1, residual: true, inPlace: true, tf32: true},
	{name: "3x3", n: 2, h: 8, w: 8, ci: 32, co: 128, k: 3, pad: 1, bias: true, residual: true, tf32: true, act: kernels.ActReLU},
	{name: "3x3-n64-stride2", n: 2, h: 9, w: 9, ci: 64, co: 64, k: 3, stride: 2, pad: 1, tf32: true, act: kernels.ActSiLU},
	{name: "1x1-stride2", n: 2, h: 8, w: 8, ci: 64, co: 256, k: 1, stride: 2, bias: true, tf32: true},
	{name: "grouped", n: 1, h: 6, w: 6, ci: 64, co: 64, k: 3, pad: 1, groups: 2, bias: true, residual: true, inPlace: true, tf32: true},
	{name: "dilated", n: 1, h: 10, w: 10, ci: 16, co: 48, k: 3, pad: 2, dil: 2, tf32: true, act: kernels.ActGELU},
	{name: "stem-3ch", n: 2, h: 16, w: 16, ci: 3, co: 64, k: 7, stride: 2, pad: 3, bias: true, tf32: true, act: kernels.ActReLU},
	{name: "f32-3x3", n: 2, h: 8, w: 8, ci: 32, co: 128, k: 3, pad: 1, bias: true},
	{name: "depthwise", n: 2, h: 8, w: 8, ci: 32, co: 32, k: 3, pad: 1, groups: 32, bias: true, residual: true, act: kernels.ActReLU},
	{name: "few-out", n: 2, h: 5, w: 5, ci: 24, co: 3, k: 3, residual: true},
}

// run calls Conv2D for the case in dtype dt on b.
func (c convCase) run(t *testing.T, b *Backend, dt kernels.DType) error {
	t.Helper()
	a := func(shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	p, g := c.params(), c.dims()
	out := a(c.n, g.Ho, g.Wo, c.co)
	if c.bias {
		p.Bias = a(c.co)
	}
	if c.residual {
		p.Residual = out
		if !c.inPlace {
			p.Residual = a(c.n, g.Ho, g.Wo, c.co)
		}
	}
	return b.Conv2D(out, a(c.n, c.h, c.w, c.ci), a(c.co, c.k, c.k, c.ci/g.Groups), p)
}

// params are the case's ConvParams without tensors.
func (c convCase) params() kernels.ConvParams {
	return kernels.ConvParams{Stride: [2]int{c.stride, c.stride}, Pad: [2]int{c.pad, c.pad}, Dilation: [2]int{c.dil, c.dil},
		Groups: c.groups, Act: c.act, TF32: c.tf32}
}

// dims is the case's geometry, as CheckConv2D resolves it.
func (c convCase) dims() kernels.ConvDims {
	return c.params().Dims(kernels.Shape{c.n, c.h, c.w, c.ci}, kernels.Shape{c.co, c.k, c.k, c.ci / max(c.groups, 1)})
}

// dryVision calls every Vision operation in every float dtype with valid
// arguments, taking every path of Conv2D (visionCases) and both pools.
func dryVision(t *testing.T, b *Backend) {
	for _, dt := range kernels.FloatTypes {
		for _, c := range visionCases {
			require.NoError(t, c.run(t, b, dt), "%v %s", dt, c.name)
		}
		x, err := b.Alloc(dt, 2, 9, 9, 40)
		require.NoError(t, err)
		pooled, err := b.Alloc(dt, 2, 5, 5, 40)
		require.NoError(t, err)
		require.NoError(t, b.MaxPool2D(pooled, x, kernels.PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Pad: [2]int{1, 1}}))
		mean, err := b.Alloc(dt, 2, 40)
		require.NoError(t, err)
		require.NoError(t, b.GlobalAvgPool(mean, x))
	}
}

// visionMust names the kernels that dryVision must launch on a device of
// compute capability major.x (TestLaunchSignatures checks them all).
func visionMust(major int) []string {
	var names []string
	for _, dt := range kernels.FloatTypes {
		s := dt.String()
		names = append(names, "conv_simt_"+s, "conv_direct_"+s, "maxpool_"+s, "global_avgpool_"+s)
		if major >= 8 {
			names = append(names, "conv_tc_"+s, "conv_tc_n64_"+s)
		}
	}
	return names
}

// TestConvPaths checks the kernel each case of visionCases launches on each
// image target and dtype, and the launch geometry.
func TestConvPaths(t *testing.T) {
	// want[case] is the kernel (without the dtype) at compute capability
	// 7.5, 8.0 and 9.0, for F16/BF16 and for F32; "matmul" means MatMul's
	// own choice.
	type paths struct{ half, f32 [3]string }
	tc := func(k string) paths { return paths{[3]string{"conv_simt", k, k}, [3]string{"conv_simt", k, k}} }
	simt := paths{[3]string{"conv_simt", "conv_simt", "conv_simt"}, [3]string{"conv_simt", "conv_simt", "conv_simt"}}
	direct := paths{[3]string{"conv_direct", "conv_direct", "conv_direct"}, [3]string{"conv_direct", "conv_direct", "conv_direct"}}
	want := map[string]paths{
		"pointwise":         {[3]string{"matmul", "matmul_tc", "matmul_sm90"}, [3]string{"matmul", "matmul", "matmul"}},
		"pointwise-inplace": {[3]string{"matmul", "matmul_tc", "matmul_sm90"}, [3]string{"matmul", "matmul_tf32", "matmul_sm90_tf32"}},
		"3x3":               tc("conv_tc"),
		"3x3-n64-stride2":   tc("conv_tc_n64"),
		"1x1-stride2":       tc("conv_tc"),
		"grouped":           tc("conv_tc_n64"),
		"dilated":           tc("conv_tc_n64"),
		"stem-3ch":          simt,
		"f32-3x3":           {[3]string{"conv_simt", "conv_tc", "conv_tc"}, [3]string{"conv_simt", "conv_simt", "conv_simt"}},
		"depthwise":         direct,
		"few-out":           direct,
	}
	for i, cc := range [][2]int{{7, 5}, {8, 0}, {9, 0}} {
		for _, dt := range kernels.FloatTypes {
			for _, c := range visionCases {
				t.Run(fmt.Sprintf("cc=%d.%d/%v/%s", cc[0], cc[1], dt, c.name), func(t *testing.T) {
					var recs []launchRec
					b := dryRun(cc[0], cc[1], &recs)
					require.NoError(t, c.run(t, b, dt))
					require.Len(t, recs, 1, "one launch")
					r := recs[0]
					w, ok := want[c.name]
					require.True(t, ok, "no expectation for %s", c.name)
					k := w.half[i]
					if dt == kernels.F32 {
						k = w.f32[i]
					}
					if k != "matmul_tf32" && k != "matmul_sm90_tf32" { // the kernels not named by their dtype
						k += "_" + dt.String()
					}
					assert.Equal(t, k, r.name)
					checkConvLaunch(t, c, r)
				})
			}
		}
	}
}

// checkConvLaunch checks the grid, block and shared memory of a launch of
// a convolution kernel, and the residual argument (beta = 1) of a pointwise
// GEMM with a residual.
func checkConvLaunch(t *testing.T, c convCase, r launchRec) {
	g := c.dims()
	groups, m, cog := g.Groups, g.M(), c.co/g.Groups
	name := r.name
	switch {
	case strings.HasPrefix(name, "conv_tc_n64_"):
		assert.Equal(t, dim3{ceilDiv(m, 128) * ceilDiv(cog, 64), 1, groups}, r.grid)
		assert.Equal(t, dim3{128, 1, 1}, r.block)
		assert.Equal(t, convTCSmemN64, r.smem)
		assert.LessOrEqual(t, cog, 64)
	case strings.HasPrefix(name, "conv_tc_"):
		assert.Equal(t, dim3{ceilDiv(m, 128) * ceilDiv(cog, 128), 1, groups}, r.grid)
		assert.Equal(t, dim3{128, 1, 1}, r.block)
		assert.Equal(t, convTCSmem, r.smem)
		assert.Greater(t, cog, 64)
	case strings.HasPrefix(name, "conv_simt_"):
		assert.Equal(t, dim3{ceilDiv(m, 64) * ceilDiv(cog, 64), 1, groups}, r.grid)
		assert.Equal(t, dim3{256, 1, 1}, r.block)
		assert.Zero(t, r.smem)
	case strings.HasPrefix(name, "conv_direct_"):
		assert.Equal(t, 256, r.block.x)
		assert.Zero(t, r.smem)
	default: // MatMul: beta = 1 carries the residual
		// The float32 arguments of the matmul kernels are alpha and beta.
		var floats []any
		for _, a := range r.args {
			if _, ok := a.(float32); ok {
				floats = append(floats, a)
			}
		}
		require.Len(t, floats, 2, "%s: alpha and beta", name)
		beta := floats[1]
		if c.residual {
			assert.Equal(t, float32(1), beta, "%s: beta", name)
		} else {
			assert.Equal(t, float32(0), beta, "%s: beta", name)
		}
		return
	}
	require.Len(t, r.args, 22, name)
	assert.Equal(t, int32(groups), r.args[20], "%s: groups", name)
	assert.Equal(t, int32(c.act), r.args[21], "%s: act", name)
	if !c.bias {
		assert.Equal(t, devptr(0), r.args[3], "%s: bias", name)
	}
	if !c.residual {
		assert.Equal(t, devptr(0), r.args[4], "%s: residual", name)
	} else if c.inPlace {
		assert.Equal(t, r.args[0], r.args[4], "%s: residual is out", name)
	}
}

// TestChoosePath checks the rules of choosePath beyond visionCases:
// alignment and channel multiples for the tensor cores, the group count
// the grid can hold, and pointwise convolutions too tall for MatMul.
func TestChoosePath(t *testing.T) {
	dims := func(n, h, ci, co, k, groups int) kernels.ConvDims {
		return kernels.ConvParams{Groups: groups}.Dims(kernels.Shape{n, h, h, ci}, kernels.Shape{co, k, k, ci / groups})
	}
	var recs []launchRec
	ampere, turing := dryRun(8, 0, &recs), dryRun(7, 5, &recs)
	for _, c := range []struct {
		b     *Backend
		g     kernels.ConvDims
		dt    kernels.DType
		tf32  bool
		x, w  devptr
		want  convPath
		about string
	}{
		{ampere, dims(1, 8, 64, 64, 3, 1), kernels.F16, false, 256, 512, convTC, "aligned f16"},
		{ampere, dims(1, 8, 64, 64, 3, 1), kernels.F16, false, 258, 512, convSIMT, "x not 16-byte aligned"},
		{ampere, dims(1, 8, 64, 64, 3, 1), kernels.BF16, false, 256, 520, convSIMT, "w not 16-byte aligned"},
		{ampere, dims(1, 8, 60, 64, 3, 1), kernels.F16, false, 256, 512, convSIMT, "60 channels: not a multiple of 8"},
		{ampere, dims(1, 8, 60, 64, 3, 1), kernels.F32, true, 256, 512, convTC, "60 channels: a multiple of 4 for TF32"},
		{ampere, dims(1, 8, 64, 64, 3, 1), kernels.F32, false, 256, 512, convSIMT, "f32 without TF32"},
		{ampere, dims(1, 8, 64, 64, 3, 4), kernels.F16, false, 256, 512, convTC, "4 groups of 16 channels"},
		{ampere, dims(1, 8, 64, 64, 3, 8), kernels.F16, false, 256, 512, convDirect, "8 groups of 8 output channels"},
		{ampere, dims(1, 8, 256, 128, 3, 8), kernels.F16, false, 256, 512, convTC, "8 groups of 32 channels"},
		{ampere, dims(1, 8, 32, 128, 3, 8), kernels.F32, true, 256, 512, convTC, "4 input channels per group: 16 bytes of F32"},
		{ampere, dims(1, 8, 32, 128, 3, 8), kernels.F16, false, 256, 512, convSIMT, "4 input channels per group: 8 bytes of F16"},
		{turing, dims(1, 8, 64, 64, 3, 1), kernels.F16, false, 256, 512, convSIMT, "compute capability 7.5"},
		{ampere, dims(1, 8, 64, 64, 1, 1), kernels.F16, false, 256, 512, convGEMM, "pointwise"},
		{ampere, dims(1, 1<<13, 64, 64, 1, 1), kernels.F16, false, 256, 512, convTC, "pointwise, too many rows for MatMul"},
		{ampere, dims(1, 4, 8<<17, 16<<17, 3, 1<<17), kernels.F16, false, 256, 512, convDirect, "more groups than the grid's z"},
	} {
		assert.Equal(t, c.want, c.b.choosePath(c.g, c.dt, c.tf32, c.x, c.w), c.about)
	}
}

// TestConvLimits checks that sizes beyond the kernels' 32-bit indices are
// errors wrapping kernels.ErrUnsupported that name Conv2D.
func TestConvLimits(t *testing.T) {
	g := kernels.ConvDims{N: 1 << 12, H: 1 << 10, W: 1 << 10, Ci: 8, Co: 8, Kh: 1, Kw: 1, Ho: 1 << 10, Wo: 1 << 10, Groups: 1,
		Stride: [2]int{1, 1}, Dilation: [2]int{1, 1}}
	require.ErrorIs(t, convFits(g), kernels.ErrUnsupported)
	g.N = 1
	require.NoError(t, convFits(g))
	g.Pad = [2]int{1 << 30, 0}
	require.ErrorIs(t, convFits(g), kernels.ErrUnsupported)
	g.Pad = [2]int{}
	g.Dilation = [2]int{1, 1 << 40} // harmless for a 1×1 window, but not an int32
	err := convFits(g)
	require.ErrorIs(t, err, kernels.ErrUnsupported)
	assert.Contains(t, err.Error(), "dilation [1 1099511627776]")
}

// TestVisionErrors checks that bad arguments are errors naming the op.
func TestVisionErrors(t *testing.T) {
	var recs []launchRec
	b := dryRun(8, 0, &recs)
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	f16 := kernels.F16
	err := b.Conv2D(a(f16, 1, 4, 4, 8), a(f16, 1, 4, 4, 8), a(f16, 8, 3, 3, 8), kernels.ConvParams{})
	require.ErrorIs(t, err, kernels.ErrShape) // 4×4 out of a 3×3 window without padding
	assert.Contains(t, err.Error(), "Conv2D")
	err = b.MaxPool2D(a(f16, 1, 2, 2, 8), a(kernels.F32, 1, 4, 4, 8), kernels.PoolParams{Kernel: [2]int{2, 2}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MaxPool2D")
	err = b.GlobalAvgPool(a(f16, 2, 9), a(f16, 2, 3, 3, 8))
	require.ErrorIs(t, err, kernels.ErrShape)
	assert.Contains(t, err.Error(), "GlobalAvgPool")
	assert.Empty(t, recs, "no launch for a bad call")
}
