package layers_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
)

const (
	rows, in, out = 6, 64, 32
)

// values returns n seeded values in [−1, 1).
func values(seed uint64, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		seed = seed*6364136223846793005 + 1442695040888963407
		v[i] = float32(seed>>40)/float32(1<<23) - 1
	}
	return v
}

// reference is act(x·wᵀ + b) + res on the host, in float64.
func reference(x, w, b, res []float32, act kernels.Activation) []float32 {
	y := make([]float32, rows*out)
	for r := range rows {
		for o := range out {
			s := 0.0
			for k := range in {
				s += float64(x[r*in+k]) * float64(w[o*in+k])
			}
			if b != nil {
				s += float64(b[o])
			}
			if act == kernels.ActReLU {
				s = math.Max(s, 0)
			}
			if res != nil {
				s += float64(res[r*out+o])
			}
			y[r*out+o] = float32(s)
		}
	}
	return y
}

// relErr is ‖got − want‖/‖want‖.
func relErr(got, want []float32) float64 {
	var d, n float64
	for i := range want {
		d += math.Pow(float64(got[i]-want[i]), 2)
		n += math.Pow(float64(want[i]), 2)
	}
	return math.Sqrt(d / n)
}

// TestLinear checks every form of the linear layer against the float
// product on the host, with and without bias, activation and a residual
// (into its own buffer and accumulated in place), and that the quantized
// forms are what they say (the int8 static form exactly the kernels'
// product of the same codes).
func TestLinear(t *testing.T) {
	be := cpu.New()
	wv, bv, xv, rv := values(1, out*in), values(2, out), values(3, rows*in), values(4, rows*out)
	for i := range xv {
		xv[i] = float32(math.Max(float64(xv[i]), -0.5)) // a static scale's amax is 1
	}
	for _, tc := range []struct {
		name     string
		bias     bool
		form     string // float, int8, int8-static, fp8, w8a16, w4a16
		residual string // none, other, inplace
		act      kernels.Activation
		bound    float64
	}{
		{"float", true, "float", "none", kernels.ActNone, 1e-6},
		{"float relu residual", true, "float", "other", kernels.ActReLU, 1e-6},
		{"float accumulated", false, "float", "inplace", kernels.ActNone, 1e-6},
		{"int8 dynamic", false, "int8", "none", kernels.ActNone, 0.02},
		{"int8 dynamic accumulated", false, "int8", "inplace", kernels.ActNone, 0.02},
		{"int8 static bias relu", true, "int8-static", "other", kernels.ActReLU, 0.02},
		{"int8 static accumulated", true, "int8-static", "inplace", kernels.ActNone, 0.02},
		{"fp8", true, "fp8", "none", kernels.ActNone, 0.08},
		{"fp8 accumulated", false, "fp8", "inplace", kernels.ActNone, 0.08},
		{"w8a16", false, "w8a16", "inplace", kernels.ActNone, 0.02},
		{"w4a16", false, "w4a16", "none", kernels.ActNone, 0.15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := nn.NewTensorSet(be)
			defer func() { require.NoError(t, params.Free()) }()
			w, err := params.Upload("l.weight", kernels.F32, wv, out, in)
			require.NoError(t, err)
			lin := layers.Linear{W: w}
			var b []float32
			if tc.bias {
				b = bv
				lin.B, err = params.Upload("l.bias", kernels.F32, bv, out)
				require.NoError(t, err)
			}
			var r quant.LinearReport
			switch tc.form {
			case "int8":
				r, err = lin.Quantize(be, params, "l", kernels.I8, nil)
			case "int8-static":
				scale, uerr := params.Upload("l.input_scale", kernels.F32, []float32{quant.Scale(1)}, 1)
				require.NoError(t, uerr)
				r, err = lin.Quantize(be, params, "l", kernels.I8, scale)
			case "fp8":
				r, err = lin.Quantize(be, params, "l", kernels.E4M3, nil)
			case "w8a16":
				r, err = lin.QuantizeWeightOnly(params, "l", kernels.WInt8, 0)
			case "w4a16":
				r, err = lin.QuantizeWeightOnly(params, "l", kernels.WInt4, 32)
			}
			require.NoError(t, err)
			assert.Equal(t, tc.form != "float", lin.Quantized())
			assert.Equal(t, tc.form == "float", lin.W != nil, "the float weight is released once quantized")
			if tc.form != "float" {
				assert.Equal(t, "l", r.Name)
				assert.Greater(t, r.WeightSQNR, 10.0)
			}
			a := nn.Allocator{Set: params}
			codes := kernels.I8
			if tc.form == "fp8" {
				codes = kernels.E4M3
			}
			s := layers.NewScratch(&a, codes, kernels.F32, rows, []int{in}, []int{out}, true)
			x, y := a.Tensor(kernels.F32, rows, in), a.Tensor(kernels.F32, rows, out)
			res := a.Tensor(kernels.F32, rows, out)
			require.NoError(t, a.Err())
			require.NoError(t, kernels.UploadFloat32(x, xv))
			require.NoError(t, kernels.UploadFloat32(res, rv))
			var resT *kernels.Tensor
			var want []float32
			switch tc.residual {
			case "none":
				want = reference(xv, wv, b, nil, tc.act)
			case "other":
				resT, want = res, reference(xv, wv, b, rv, tc.act)
			case "inplace":
				require.NoError(t, kernels.UploadFloat32(y, rv))
				resT, want = y, reference(xv, wv, b, rv, tc.act)
			}
			prepared, err := lin.Prepare(be, s, x)
			require.NoError(t, err)
			assert.Same(t, x, prepared.X)
			assert.Equal(t, lin.Q != nil, prepared.Codes != nil, "codes exactly where the layer reads them")
			require.NoError(t, lin.Project(be, s, y, prepared, tc.act, resT))
			got, err := kernels.ToFloat32(y)
			require.NoError(t, err)
			e := relErr(got, want)
			assert.Less(t, e, tc.bound, "rel-err against the float product")
			if tc.form != "float" {
				assert.Greater(t, e, 1e-6, "a quantized product differs from the float one")
			}
			if tc.form == "int8-static" && tc.residual == "other" {
				direct := a.Tensor(kernels.F32, rows, out)
				require.NoError(t, a.Err())
				q, _ := kernels.Group[kernels.Quant](be)
				require.NoError(t, q.QMatMul(direct, prepared.Codes, lin.Q.W, kernels.QMatMulParams{AScale: lin.Q.InScale, BScale: lin.Q.Scale, Bias: lin.Q.B, Act: tc.act}))
				require.NoError(t, be.Add(direct, direct, res))
				d, err := kernels.ToFloat32(direct)
				require.NoError(t, err)
				assert.Equal(t, d, got, "the kernels' product of the same codes, bit for bit")
			}
		})
	}
}

// TestLinearErrors checks that a quantized layer without its scratch, or
// whose input was not prepared, is an error, not a wrong product.
func TestLinearErrors(t *testing.T) {
	be := cpu.New()
	params := nn.NewTensorSet(be)
	defer func() { require.NoError(t, params.Free()) }()
	w, err := params.Upload("l.weight", kernels.F32, values(1, out*in), out, in)
	require.NoError(t, err)
	lin := layers.Linear{W: w}
	_, err = lin.Quantize(be, params, "l", kernels.I8, nil)
	require.NoError(t, err)
	a := nn.Allocator{Set: params}
	x, y := a.Tensor(kernels.F32, rows, in), a.Tensor(kernels.F32, rows, out)
	require.NoError(t, a.Err())
	_, err = lin.Prepare(be, nil, x)
	require.ErrorIs(t, err, kernels.ErrShape)
	assert.ErrorContains(t, err, "no buffer of codes")
	s := layers.NewScratch(&a, kernels.I8, kernels.F32, rows, []int{in}, nil, true)
	require.NoError(t, a.Err())
	err = lin.Project(be, s, y, layers.Input{X: x}, kernels.ActNone, nil)
	require.ErrorIs(t, err, kernels.ErrValue)
	prepared, err := lin.Prepare(be, s, x)
	require.NoError(t, err)
	err = lin.Project(be, s, y, prepared, kernels.ActNone, y)
	require.ErrorIs(t, err, kernels.ErrShape, "no sum buffer for a residual")

	b, err := params.Upload("b.weight", kernels.F32, values(1, out*in), out, in)
	require.NoError(t, err)
	bias, err := params.Upload("b.bias", kernels.F32, values(2, out), out)
	require.NoError(t, err)
	withBias := layers.Linear{W: b, B: bias}
	_, err = withBias.QuantizeWeightOnly(params, "b", kernels.WInt8, 0)
	require.ErrorIs(t, err, kernels.ErrUnsupported)
}

// TestSetWeightOnlyScales checks the dtype SetWeightOnly keeps the scales
// in (float16 for int8 in groups, float32 otherwise) and that a scale
// float16 cannot hold, or an infinite one, is refused naming the layer and
// the scale.
func TestSetWeightOnlyScales(t *testing.T) {
	for _, c := range []struct {
		name   string
		format kernels.WeightFormat
		group  int
		scale  float32
		want   kernels.DType
		err    string
	}{
		{"int8 per channel", kernels.WInt8, 0, 0.1, kernels.F32, ""},
		{"int8 in groups", kernels.WInt8, 32, 0.099975586, kernels.F16, ""},
		{"int4 in groups", kernels.WInt4, 32, 0.1, kernels.F32, ""},
		{"int8 in groups, not a float16", kernels.WInt8, 32, 0.1, 0, "l: scale 3 (0.1) is not a finite float16"},
		{"int8 in groups, infinite", kernels.WInt8, 32, float32(math.Inf(1)), 0, "l: scale 3 (+Inf) is not a finite float16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := cpu.New()
			params := nn.NewTensorSet(be)
			defer func() { require.NoError(t, params.Free()) }()
			w, err := params.Upload("l.weight", kernels.F32, values(1, out*in), out, in)
			require.NoError(t, err)
			lin := layers.Linear{W: w}
			codes := make([]byte, out*in*c.format.Bits()/8)
			n := out
			if c.group > 0 {
				n = out * in / c.group
			}
			scales := make([]float32, n)
			for i := range scales {
				scales[i] = 0.5
			}
			scales[3] = c.scale
			err = lin.SetWeightOnly(params, "l", c.format, c.group, codes, scales)
			if c.err != "" {
				require.ErrorIs(t, err, kernels.ErrValue)
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, lin.WO.Scales.DType())
			got, err := kernels.ToFloat32(lin.WO.Scales)
			require.NoError(t, err)
			require.Equal(t, scales, got)
		})
	}
}

// TestCalibrator checks a site's scale, its input error, and the errors
// of a site never observed or observed at zero.
func TestCalibrator(t *testing.T) {
	be := cpu.New()
	params := nn.NewTensorSet(be)
	defer func() { require.NoError(t, params.Free()) }()
	c := layers.NewCalibrator(func() quant.Observer { o, _ := quant.New("absmax", quant.Options{}); return o })
	x, err := params.Upload("x", kernels.F32, []float32{0.5, -2, 1}, 3)
	require.NoError(t, err)
	zero, err := params.Upload("z", kernels.F32, []float32{0, 0}, 2)
	require.NoError(t, err)
	require.NoError(t, c.Observe("a", x))
	require.NoError(t, c.Observe("z", zero))
	s, err := c.Site("a")
	require.NoError(t, err)
	assert.Equal(t, float32(2), s.Amax)
	assert.Equal(t, quant.Scale(2), s.Scale)
	r := s.Report(quant.LinearReport{Name: "a"})
	assert.Equal(t, float32(2), r.InputAmax)
	assert.Equal(t, s.Err.SQNR, r.InputSQNR)
	_, err = c.Site("z")
	require.ErrorIs(t, err, kernels.ErrValue)
	assert.ErrorContains(t, err, "input of z: calibrated amax 0")
	_, err = c.Site("never")
	require.ErrorIs(t, err, quant.ErrNoData)
}
