//go:build cuda

package cuda

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// wmmFormats are the weight formats of WMatMul.
var wmmFormats = []kernels.WeightFormat{kernels.WInt8, kernels.WInt4, kernels.WNF4}

// wmmCase is one WMatMul call of the dry runs: x [lead…, k], the weight
// [n, k] in groups of group values (4-bit formats), with a bias when
// asked. formats, when set, are the only formats the case takes.
type wmmCase struct {
	name     string
	lead     []int
	n, k     int
	group    int
	bias     bool
	formats  []kernels.WeightFormat
	rowsGEMV int // R of the wmatmul_gemvR kernel the case takes, 0 if none
}

// wmmCases take every path of WMatMul: each GEMV variant (1, 2, 3 → 4 and
// 8 rows), prefill rows with K a multiple of 16 (tensor cores from compute
// capability 8.0 for 16-bit x) and an int8 K that is not (the SIMT
// kernel), with edges in M and N.
var wmmCases = []wmmCase{
	{name: "decode", lead: []int{1}, n: 67, k: 256, group: 128, bias: true, rowsGEMV: 1},
	{name: "decode-2", lead: []int{2}, n: 9, k: 128, group: 32, rowsGEMV: 2},
	{name: "decode-3", lead: []int{3, 1}, n: 5, k: 64, group: 64, bias: true, rowsGEMV: 4},
	{name: "decode-8", lead: []int{2, 4}, n: 96, k: 768, group: 128, rowsGEMV: 8},
	{name: "decode-k-odd", lead: []int{1}, n: 9, k: 7, formats: []kernels.WeightFormat{kernels.WInt8}, rowsGEMV: 1},
	{name: "prefill", lead: []int{3, 11}, n: 130, k: 256, group: 64, bias: true},
	{name: "prefill-9", lead: []int{9}, n: 5, k: 96, group: 32},
	{name: "prefill-k-odd", lead: []int{37}, n: 64, k: 300, bias: true, formats: []kernels.WeightFormat{kernels.WInt8}},
}

// takes reports whether the case runs in format f.
func (c wmmCase) takes(f kernels.WeightFormat) bool {
	return c.formats == nil || slices.Contains(c.formats, f)
}

// weight returns a weight of format f for the case, allocated on b.
func (c wmmCase) weight(t *testing.T, b *Backend, f kernels.WeightFormat) kernels.QWeight {
	t.Helper()
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	if f == kernels.WInt8 {
		return kernels.QWeight{Format: f, Data: a(kernels.I8, c.n, c.k), Scales: a(kernels.F32, c.n)}
	}
	return kernels.QWeight{Format: f, Data: a(kernels.I8, c.n, c.k/2), Scales: a(kernels.F32, c.n, c.k/c.group), Group: c.group}
}

// run calls WMatMul for the case with the weight in format f and x and
// out of dtype dt.
func (c wmmCase) run(t *testing.T, b *Backend, f kernels.WeightFormat, dt kernels.DType) error {
	t.Helper()
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	var bias *kernels.Tensor
	if c.bias {
		bias = a(kernels.F32, c.n)
	}
	out := a(dt, append(slices.Clone(c.lead), c.n)...)
	return b.WMatMul(out, a(dt, append(slices.Clone(c.lead), c.k)...), c.weight(t, b, f), bias)
}

// dryWeightQuant calls WMatMul on every path (wmmCases) in every weight
// format and x dtype.
func dryWeightQuant(t *testing.T, b *Backend) {
	for _, f := range wmmFormats {
		for _, dt := range kernels.FloatTypes {
			for _, c := range wmmCases {
				if c.takes(f) {
					require.NoError(t, c.run(t, b, f, dt), "%v %v %s", f, dt, c.name)
				}
			}
		}
	}
}

// weightQuantMust names the kernels that dryWeightQuant must launch on a
// device of compute capability major.x (TestLaunchSignatures checks them
// all): every GEMV variant, the tensor-core kernels for 16-bit x from 8.0,
// and the SIMT kernel where they do not apply (F32 x, compute capability
// 7.5, int8 with K not a multiple of 16).
func weightQuantMust(major int) []string {
	var names []string
	for _, f := range wmmFormats {
		for _, dt := range kernels.FloatTypes {
			s := f.String() + "_" + dt.String()
			for _, r := range []int{1, 2, 4, 8} {
				names = append(names, fmt.Sprintf("wmatmul_gemv%d_%s", r, s))
			}
			switch {
			case major >= 8 && dt != kernels.F32:
				names = append(names, "wmatmul_tc_"+s)
				if f == kernels.WInt8 {
					names = append(names, "wmatmul_simt_"+s)
				}
			default:
				names = append(names, "wmatmul_simt_"+s)
			}
		}
	}
	return names
}

// TestWMatMulPaths checks the kernel each case of wmmCases launches on each
// image target, weight format and x dtype, its geometry, and its
// arguments: the tensors, the sizes, and the group (0 for int8).
func TestWMatMulPaths(t *testing.T) {
	// prefill[case] is the kernel (without format and dtype) of 16-bit x
	// at compute capability 7.5, 8.0 and 9.0; F32 x takes wmatmul_simt.
	prefill := map[string][3]string{
		"prefill":       {"wmatmul_simt", "wmatmul_tc", "wmatmul_tc"},
		"prefill-9":     {"wmatmul_simt", "wmatmul_tc", "wmatmul_tc"},
		"prefill-k-odd": {"wmatmul_simt", "wmatmul_simt", "wmatmul_simt"},
	}
	for i, cc := range [][2]int{{7, 5}, {8, 0}, {9, 0}} {
		for _, f := range wmmFormats {
			for _, dt := range kernels.FloatTypes {
				for _, c := range wmmCases {
					if !c.takes(f) {
						continue
					}
					t.Run(fmt.Sprintf("cc=%d.%d/%v/%v/%s", cc[0], cc[1], f, dt, c.name), func(t *testing.T) {
						var recs []launchRec
						b := dryRun(cc[0], cc[1], &recs)
						require.NoError(t, c.run(t, b, f, dt))
						require.Len(t, recs, 1, "one launch")
						r := recs[0]
						m := kernels.Shape(c.lead).Len()
						kernel := "wmatmul_simt"
						switch {
						case c.rowsGEMV > 0:
							kernel = fmt.Sprintf("wmatmul_gemv%d", c.rowsGEMV)
						case dt != kernels.F32:
							kernel = prefill[c.name][i]
						}
						assert.Equal(t, kernel+"_"+f.String()+"_"+dt.String(), r.name)
						switch kernel {
						case "wmatmul_tc":
							assert.Equal(t, dim3{ceilDiv(c.n, 64), ceilDiv(m, 128), 1}, r.grid)
							assert.Equal(t, dim3{128, 1, 1}, r.block)
							assert.Equal(t, wmmTCSmem, r.smem)
						case "wmatmul_simt":
							assert.Equal(t, dim3{ceilDiv(c.n, 64), ceilDiv(m, 64), 1}, r.grid)
							assert.Equal(t, dim3{256, 1, 1}, r.block)
							assert.Zero(t, r.smem)
						default:
							assert.Equal(t, dim3{ceilDiv(c.n, 8), 1, 1}, r.grid)
							assert.Equal(t, dim3{128, 1, 1}, r.block)
							assert.Zero(t, r.smem)
						}
						require.Len(t, r.args, 9)
						for j, what := range []string{"out", "x", "w.Data", "w.Scales"} {
							assert.NotZero(t, r.args[j], what)
						}
						if c.bias {
							assert.NotZero(t, r.args[4], "bias")
						} else {
							assert.Equal(t, devptr(0), r.args[4], "no bias")
						}
						group := int32(c.group)
						if f == kernels.WInt8 {
							group = 0
						}
						assert.Equal(t, []any{int32(m), int32(c.n), int32(c.k), group}, r.args[5:], "M, N, K, group")
					})
				}
			}
		}
	}
}

// TestChooseWMatMul checks the rules of chooseWMatMul beyond wmmCases: the
// GEMV row limit, the tensor cores' dtypes, K and alignment.
func TestChooseWMatMul(t *testing.T) {
	var recs []launchRec
	hopper, ampere, turing := dryRun(9, 0, &recs), dryRun(8, 0, &recs), dryRun(7, 5, &recs)
	f16, bf16, f32 := kernels.F16, kernels.BF16, kernels.F32
	for _, c := range []struct {
		b       *Backend
		m, n, k int
		dt      kernels.DType
		x, w    devptr
		want    wmmPath
		about   string
	}{
		{ampere, 8, 4096, 4096, f16, 256, 512, wmmGEMV, "8 rows"},
		{ampere, 9, 4096, 4096, f16, 256, 512, wmmTC, "9 rows"},
		{hopper, 512, 5632, 2048, bf16, 256, 512, wmmTC, "bf16 on 9.0"},
		{ampere, 512, 768, 3088, f16, 256, 512, wmmTC, "K a multiple of 16"},
		{ampere, 512, 768, 3080, f16, 256, 512, wmmSIMT, "K a multiple of 8"},
		{ampere, 512, 768, 3072, f16, 264, 512, wmmSIMT, "x not 16-byte aligned"},
		{ampere, 512, 768, 3072, f16, 256, 520, wmmSIMT, "w not 16-byte aligned"},
		{ampere, 512, 768, 3072, f32, 256, 512, wmmSIMT, "f32 x"},
		{turing, 512, 768, 3072, f16, 256, 512, wmmSIMT, "compute capability 7.5"},
		{turing, 1, 768, 3072, f32, 256, 512, wmmGEMV, "one row on 7.5"},
	} {
		d := check.WMatMulDims{M: c.m, N: c.n, K: c.k}
		assert.Equal(t, c.want, c.b.chooseWMatMul(d, c.dt, c.x, c.w), c.about)
	}
}

// TestGEMVVariant checks that M rows take the fewest of 1, 2, 4 and 8 rows
// that hold them.
func TestGEMVVariant(t *testing.T) {
	for _, c := range []struct{ m, want int }{{1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {7, 8}, {8, 8}} {
		assert.Equal(t, c.want, gemvVariant(c.m), "%d rows", c.m)
	}
}

// TestWMatMulErrors checks that bad calls fail before any launch, with
// errors naming the op.
func TestWMatMulErrors(t *testing.T) {
	var recs []launchRec
	b := dryRun(8, 0, &recs)
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	c := wmmCase{n: 8, k: 128, group: 64}
	w := c.weight(t, b, kernels.WInt4)
	bad := w
	bad.Group = 48
	err := b.WMatMul(a(kernels.F16, 2, 8), a(kernels.F16, 2, 128), bad, nil)
	require.ErrorIs(t, err, kernels.ErrShape)
	assert.Contains(t, err.Error(), "WMatMul")
	err = b.WMatMul(a(kernels.F32, 2, 8), a(kernels.F16, 2, 128), w, nil)
	require.ErrorIs(t, err, kernels.ErrDType)
	assert.Contains(t, err.Error(), "WMatMul")
	err = b.WMatMul(a(kernels.F16, 2, 8), a(kernels.F16, 2, 128), w, a(kernels.F16, 8))
	require.ErrorIs(t, err, kernels.ErrDType)
	assert.Contains(t, err.Error(), "bias")
	assert.Empty(t, recs, "no launch for a bad call")
}
