//go:build cuda

package cuda

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// qmmOuts are the out dtypes of QMatMul.
var qmmOuts = []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.I8, kernels.I32}

// qmmCase is one QMatMul call of the dry runs: a [lead…, k], b [n, k].
type qmmCase struct {
	name string
	lead []int
	n, k int
}

// qmmCases take every path of QMatMul: few rows (the GEMV kernel), K a
// multiple of 16 (tensor cores with cp.async from compute capability 8.0,
// and wgmma with TMA on 9.0 from a whole 128×256 tile and 128 of K on)
// and other K (a multiple of 4, odd), with edges in M, N and K.
var qmmCases = []qmmCase{
	{name: "decode", lead: []int{1}, n: 67, k: 132},
	{name: "decode-8", lead: []int{2, 4}, n: 96, k: 768},
	{name: "decode-odd", lead: []int{6}, n: 9, k: 1},
	{name: "k16", lead: []int{3, 11}, n: 130, k: 256},
	{name: "k4", lead: []int{37}, n: 64, k: 1028},
	{name: "k-odd", lead: []int{3, 7}, n: 9, k: 37},
	{name: "rows-9", lead: []int{9}, n: 5, k: 12},
	{name: "hopper", lead: []int{2, 96}, n: 320, k: 400},
}

// run calls QMatMul for the case with out of dtype dt and the epilogue
// operands that dtype allows: per-row scales, bias and GELU for float
// outs, a per-tensor AScale, per-channel BScale and OutScale for int8.
func (c qmmCase) run(t *testing.T, b *Backend, dt kernels.DType) error {
	t.Helper()
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	m := kernels.Shape(c.lead).Len()
	var p kernels.QMatMulParams
	switch dt {
	case kernels.I32:
	case kernels.I8:
		p = kernels.QMatMulParams{AScale: a(kernels.F32, 1), BScale: a(kernels.F32, c.n), OutScale: a(kernels.F32, 1)}
	default:
		p = kernels.QMatMulParams{AScale: a(kernels.F32, m), BScale: a(kernels.F32, c.n), Bias: a(kernels.F32, c.n), Act: kernels.ActGELU}
	}
	out := a(dt, append(append([]int{}, c.lead...), c.n)...)
	return b.QMatMul(out, a(kernels.I8, append(append([]int{}, c.lead...), c.k)...), a(kernels.I8, c.n, c.k), p)
}

// dryQuant calls every Quant operation with valid arguments: Quantize
// static (per tensor and per row) and dynamic and Dequantize in every float
// dtype, on rows of vector and odd lengths, and QMatMul on every path
// (qmmCases) into every out dtype.
func dryQuant(t *testing.T, b *Backend) {
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	f32, i8 := kernels.F32, kernels.I8
	for _, dt := range kernels.FloatTypes {
		for _, s := range [][2]int{{5, 7}, {33, 768}} {
			rows, k := s[0], s[1]
			x, q := a(dt, rows, k), a(i8, rows, k)
			require.NoError(t, b.Quantize(q, a(f32, 1), x, false))
			require.NoError(t, b.Quantize(q, a(f32, rows), x, false))
			require.NoError(t, b.Quantize(q, a(f32, rows), x, true))
			require.NoError(t, b.Dequantize(x, q, a(f32, 1)))
			require.NoError(t, b.Dequantize(x, q, a(f32, rows)))
		}
	}
	for _, dt := range qmmOuts {
		for _, c := range qmmCases {
			require.NoError(t, c.run(t, b, dt), "%v %s", dt, c.name)
		}
	}
}

// quantMust names the kernels that dryQuant must launch on a device of
// compute capability major.x (TestLaunchSignatures checks them all).
func quantMust(major int) []string {
	var names []string
	for _, dt := range kernels.FloatTypes {
		names = append(names, "quantize_"+dt.String(), "dequantize_"+dt.String())
	}
	for _, dt := range qmmOuts {
		s := dt.String()
		names = append(names, "qmatmul_gemv_"+s, "qmatmul_mma_"+s)
		if major >= 8 {
			names = append(names, "qmatmul_tc_"+s)
		}
		if major == 9 {
			names = append(names, "qmatmul_sm90_"+s)
		}
	}
	return names
}

// TestQMatMulPaths checks the kernel each case of qmmCases launches on each
// image target and out dtype, its geometry, and the arguments that carry
// the semantics: the sizes, which scales are per row, the epilogue
// operands and the activation.
func TestQMatMulPaths(t *testing.T) {
	// want[case] is the kernel (without the dtype) at compute capability
	// 7.5, 8.0 and 9.0.
	want := map[string][3]string{
		"decode":     {"qmatmul_gemv", "qmatmul_gemv", "qmatmul_gemv"},
		"decode-8":   {"qmatmul_gemv", "qmatmul_gemv", "qmatmul_gemv"},
		"decode-odd": {"qmatmul_gemv", "qmatmul_gemv", "qmatmul_gemv"},
		"k16":        {"qmatmul_mma", "qmatmul_tc", "qmatmul_tc"},
		"k4":         {"qmatmul_mma", "qmatmul_mma", "qmatmul_mma"},
		"k-odd":      {"qmatmul_mma", "qmatmul_mma", "qmatmul_mma"},
		"rows-9":     {"qmatmul_mma", "qmatmul_mma", "qmatmul_mma"},
		"hopper":     {"qmatmul_mma", "qmatmul_tc", "qmatmul_sm90"},
	}
	for i, cc := range [][2]int{{7, 5}, {8, 0}, {9, 0}} {
		for _, dt := range qmmOuts {
			for _, c := range qmmCases {
				t.Run(fmt.Sprintf("cc=%d.%d/%v/%s", cc[0], cc[1], dt, c.name), func(t *testing.T) {
					var recs []launchRec
					b := dryRun(cc[0], cc[1], &recs)
					require.NoError(t, c.run(t, b, dt))
					require.Len(t, recs, 1, "one launch")
					r := recs[0]
					assert.Equal(t, want[c.name][i]+"_"+dt.String(), r.name)
					m := kernels.Shape(c.lead).Len()
					switch want[c.name][i] {
					case "qmatmul_gemv":
						assert.Equal(t, dim3{ceilDiv(c.n, 8), 1, 1}, r.grid)
						assert.Equal(t, dim3{256, 1, 1}, r.block)
						assert.Zero(t, r.smem)
					case "qmatmul_tc":
						assert.Equal(t, dim3{ceilDiv(c.n, 128), ceilDiv(m, 128), 1}, r.grid)
						assert.Equal(t, dim3{128, 1, 1}, r.block)
						assert.Equal(t, qmmTCSmem, r.smem)
					case "qmatmul_sm90":
						assert.Equal(t, dim3{ceilDiv(m, 128) * ceilDiv(c.n, 256), 1, 1}, r.grid)
						assert.Equal(t, dim3{384, 1, 1}, r.block)
						assert.Equal(t, qmmSM90Smem, r.smem)
						assert.IsType(t, tensorMap{}, r.args[1], "a's tensor map")
						assert.IsType(t, tensorMap{}, r.args[2], "b's tensor map")
					default:
						assert.Equal(t, dim3{ceilDiv(c.n, 128), ceilDiv(m, 128), 1}, r.grid)
						assert.Equal(t, dim3{256, 1, 1}, r.block)
						assert.Equal(t, qmmMMASmem, r.smem)
					}
					require.Len(t, r.args, 15)
					assert.Equal(t, []any{int32(m), int32(c.n), int32(c.k), int32(c.n)}, r.args[8:12], "M, N, K, ldc = N")
					assert.Equal(t, devptr(0), r.args[7], "no residual")
					var ascale, bscale, bias, outScale = r.args[3], r.args[4], r.args[5], r.args[6]
					switch dt {
					case kernels.I32:
						assert.Equal(t, []any{devptr(0), devptr(0), devptr(0), devptr(0)}, []any{ascale, bscale, bias, outScale})
						assert.Equal(t, []any{int32(0), int32(0), int32(0)}, r.args[12:], "no per-row scales, no activation")
					case kernels.I8:
						assert.NotZero(t, ascale)
						assert.NotZero(t, outScale)
						assert.Equal(t, devptr(0), bias)
						assert.Equal(t, []any{int32(0), int32(1), int32(kernels.ActNone)}, r.args[12:], "per-tensor AScale, per-channel BScale")
					default: // AScale [M] is per row unless M is 1
						assert.NotZero(t, bias)
						assert.Equal(t, devptr(0), outScale)
						assert.Equal(t, []any{int32(boolInt(m > 1)), int32(1), int32(kernels.ActGELU)}, r.args[12:], "per-row scales, GELU")
					}
				})
			}
		}
	}
}

// TestChooseQMatMul checks the rules of chooseQMatMul beyond qmmCases:
// the GEMV row limit, the tensor cores' alignment, and the Hopper kernel's
// sizes, alignment and compute capability.
func TestChooseQMatMul(t *testing.T) {
	var recs []launchRec
	ampere, turing := dryRun(8, 0, &recs), dryRun(7, 5, &recs)
	hopper, blackwell := dryRun(9, 0, &recs), dryRun(10, 0, &recs)
	for _, c := range []struct {
		b       *Backend
		m, n, k int
		a, w    devptr
		want    qmmPath
		about   string
	}{
		{ampere, 8, 4096, 4096, 256, 512, qmmGEMV, "8 rows"},
		{ampere, 9, 4096, 4096, 256, 512, qmmTC, "9 rows"},
		{ampere, 512, 768, 3072, 256, 512, qmmTC, "aligned, K a multiple of 16"},
		{ampere, 512, 768, 3076, 256, 512, qmmMMA, "K a multiple of 4"},
		{ampere, 512, 768, 3073, 256, 512, qmmMMA, "odd K"},
		{ampere, 512, 768, 3072, 260, 512, qmmMMA, "a not 16-byte aligned"},
		{ampere, 512, 768, 3072, 256, 520, qmmMMA, "b not 16-byte aligned"},
		{turing, 512, 768, 3072, 256, 512, qmmMMA, "compute capability 7.5"},
		{turing, 1, 768, 3072, 256, 512, qmmGEMV, "one row on 7.5"},
		{hopper, 512, 768, 3072, 256, 512, qmmSM90, "9.0, aligned, K a multiple of 16"},
		{hopper, 128, 256, 128, 256, 512, qmmSM90, "9.0, one tile, one stage"},
		{hopper, 127, 4096, 4096, 256, 512, qmmTC, "9.0, less than a tile of rows"},
		{hopper, 4096, 255, 4096, 256, 512, qmmTC, "9.0, less than a tile of columns"},
		{hopper, 4096, 4096, 112, 256, 512, qmmTC, "9.0, less than a stage of K"},
		{hopper, 512, 768, 3088, 256, 512, qmmSM90, "9.0, K a multiple of 16, not of 128"},
		{hopper, 512, 768, 3076, 256, 512, qmmMMA, "9.0, K a multiple of 4"},
		{hopper, 512, 768, 3072, 264, 512, qmmMMA, "9.0, a 8-byte aligned"},
		{hopper, 512, 768, 3072, 256, 520, qmmMMA, "9.0, b 8-byte aligned"},
		{hopper, 8, 4096, 4096, 256, 512, qmmGEMV, "9.0, 8 rows"},
		{hopper, 512, sm90MaxDim + 1, 128, 256, 512, qmmTC, "9.0, N past sm90MaxDim"},
		{blackwell, 512, 768, 3072, 256, 512, qmmTC, "10.0 has no sm_90a image"},
	} {
		d := check.QMatMulDims{M: c.m, N: c.n, K: c.k}
		assert.Equal(t, c.want, c.b.chooseQMatMul(d, c.a, c.w), c.about)
	}
}

// TestQuantLaunch checks the thread groups of the row kernels: a power of
// two from 32 to 256 threads per row, 256 threads per block, and enough
// blocks for every row.
func TestQuantLaunch(t *testing.T) {
	for _, c := range []struct{ rows, k, group int }{
		{1, 1, 32}, {5, 7, 32}, {3, 256, 32}, {3, 257, 64}, {33, 768, 128}, {2, 4096, 256}, {1, 1 << 20, 256},
		{3 << 21, 16, 32},
	} {
		grid, blk := quantLaunch(c.rows, c.k)
		assert.Equal(t, dim3{c.group, 256 / c.group, 0}, blk, "%d×%d", c.rows, c.k)
		assert.Equal(t, min(ceilDiv(c.rows, 256/c.group), 1<<20), grid.x, "%d×%d", c.rows, c.k)
	}
	var recs []launchRec
	b := dryRun(8, 0, &recs)
	x, err := b.Alloc(kernels.BF16, 2, 3, 10)
	require.NoError(t, err)
	q, err := b.Alloc(kernels.I8, 2, 3, 10)
	require.NoError(t, err)
	s, err := b.Alloc(kernels.F32, 6)
	require.NoError(t, err)
	require.NoError(t, b.Quantize(q, s, x, true))
	require.NoError(t, b.Dequantize(x, q, s))
	require.Len(t, recs, 2)
	assert.Equal(t, []any{ptrOf(q), ptrOf(s), ptrOf(x), int64(6), int32(10), int32(1), int32(1)}, recs[0].args)
	assert.Equal(t, []any{ptrOf(x), ptrOf(q), ptrOf(s), int64(6), int32(10), int32(1)}, recs[1].args)
}

// TestQuantErrors checks that bad calls fail before any launch, with
// errors naming the op.
func TestQuantErrors(t *testing.T) {
	var recs []launchRec
	b := dryRun(8, 0, &recs)
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	f32, i8 := kernels.F32, kernels.I8
	err := b.Quantize(a(i8, 4, 8), a(f32, 1), a(f32, 4, 8), true)
	require.ErrorIs(t, err, kernels.ErrShape)
	assert.Contains(t, err.Error(), "Quantize")
	err = b.Dequantize(a(i8, 4, 8), a(i8, 4, 8), a(f32, 1))
	require.ErrorIs(t, err, kernels.ErrDType)
	assert.Contains(t, err.Error(), "Dequantize")
	err = b.QMatMul(a(f32, 4, 6), a(i8, 4, 6), a(i8, 6, 8), kernels.QMatMulParams{AScale: a(f32, 1), BScale: a(f32, 1)})
	require.ErrorIs(t, err, kernels.ErrShape)
	assert.Contains(t, err.Error(), "QMatMul")
	assert.Empty(t, recs, "no launch for a bad call")
}
