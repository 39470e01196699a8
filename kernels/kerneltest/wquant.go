package kerneltest

import (
	"fmt"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, weightQuantTests()) }

// weightQuant returns the backend's WeightQuant ops; every backend
// implements them.
func (e *env) weightQuant() kernels.WeightQuant {
	e.Helper()
	return group[kernels.WeightQuant](e)
}

// RefDequantWeight is the float64 matrix [n, k] of a weight-only quantized
// one: data holds the codes (int8 [n, k]) or the packed bytes of a 4-bit
// format ([n, k/2], low nibble first), scales [n] or [n, k/group].
func RefDequantWeight(f kernels.WeightFormat, data []int8, scales []float64, n, k, group int) []float64 {
	w := make([]float64, n*k)
	levels := f.Levels()
	for r := range n {
		for c := range k {
			if f == kernels.WInt8 {
				g := group
				if g == 0 { // one scale per row
					g = k
				}
				w[r*k+c] = float64(data[r*k+c]) * scales[r*(k/g)+c/g]
				continue
			}
			b := uint8(data[r*k/2+c/2])
			code := b & 15
			if c%2 == 1 {
				code = b >> 4
			}
			w[r*k+c] = float64(levels[code]) * scales[r*(k/group)+c/group]
		}
	}
	return w
}

// wmmCase is one WMatMul geometry: x [m, k], the weight [n, k].
type wmmCase struct {
	m, n, k, group int
	bias           bool
}

func (c wmmCase) String() string {
	s := fmt.Sprintf("x=%dx%d/w=%dx%d", c.m, c.k, c.n, c.k)
	if c.group > 0 {
		s += fmt.Sprintf("/group=%d", c.group)
	}
	if c.bias {
		s += "/bias"
	}
	return s
}

// weightQuantTests is the WeightQuant suite: decode (one row), batched
// decode (up to 16 rows, in groups of four and the rows left over, the
// weight over more than one block of the CPU's) and prefill (more rows:
// tiles of twelve and the rows left over, a last panel of fewer than 32
// columns, K over several of the CPU's blocks of 256 values or of a
// group's multiple) shapes, K not a multiple of a vector for int8, one and
// several groups per row, groups spanning several 128-value chunks and
// rows with a tail past the last chunk (the CPU's lane-ordered 4-bit
// kernel), every x dtype; int8 in groups with float32 and float16 scales.
func weightQuantTests() []test {
	var ts []test
	cases := map[kernels.WeightFormat][]wmmCase{
		kernels.WInt8: {{1, 5, 7, 0, false}, {1, 67, 300, 0, true}, {3, 33, 64, 0, false}, {9, 20, 129, 0, true},
			{6, 20, 300, 0, true}, {5, 300, 1024, 0, false}, {16, 40, 2048, 32, false}, {7, 9, 160, 32, false},
			{1, 33, 2048, 32, false}, {2, 7, 160, 32, true}, {1, 5, 192, 96, false}, {9, 20, 256, 64, true},
			{17, 40, 300, 0, true}, {42, 70, 1024, 32, false}, {19, 5, 576, 96, false}},
		kernels.WInt4: {{1, 5, 128, 128, false}, {1, 67, 512, 128, true}, {3, 17, 256, 32, false}, {9, 40, 384, 128, true}, {1, 33, 2048, 32, false}, {2, 7, 160, 32, true}, {1, 7, 1024, 256, false},
			{30, 33, 640, 128, true}, {24, 64, 544, 32, false}},
		kernels.WNF4: {{1, 5, 64, 64, false}, {1, 67, 256, 64, true}, {2, 9, 96, 32, false}, {1, 9, 320, 64, false}, {9, 40, 320, 64, true},
			{20, 40, 320, 64, false}},
	}
	for _, f := range []kernels.WeightFormat{kernels.WInt8, kernels.WInt4, kernels.WNF4} {
		for _, dt := range kernels.FloatTypes {
			for _, c := range cases[f] {
				ts = append(ts, test{name("WMatMul", "format", f, "dtype", dt, "case", c), func(e *env) { e.wmatmul(f, dt, c, kernels.F32) }})
				if f == kernels.WInt8 && c.group > 0 {
					ts = append(ts, test{name("WMatMul", "format", f, "scales", kernels.F16, "dtype", dt, "case", c), func(e *env) { e.wmatmul(f, dt, c, kernels.F16) }})
				}
			}
		}
	}
	return append(ts, test{"WMatMul/errors", wmatmulErrors})
}

// qweight makes random codes and scales of format f for an [n, k] weight,
// the scales of int8 in groups in dtype sdt (F32 or F16).
func (e *env) qweight(f kernels.WeightFormat, n, k, group int, sdt kernels.DType) (kernels.QWeight, []float64) {
	w := kernels.QWeight{Format: f, Group: group}
	var data []int8
	var sv []float64
	switch {
	case f == kernels.WInt8:
		data = e.randInt8(n*k, -127, 127)
		w.Data = e.int8s("w.Data", data, n, k)
		if group == 0 {
			w.Scales, sv = e.scales("w.Scales", n)
		} else {
			w.Scales, sv = e.Uniform("w.Scales", sdt, 0.005, 0.02, n, k/group)
		}
	default:
		data = e.randInt8(n*k/2, -128, 127)
		w.Data = e.int8s("w.Data", data, n, k/2)
		w.Scales, sv = e.Uniform("w.Scales", kernels.F32, 0.005, 0.02, n, k/group)
	}
	return w, RefDequantWeight(f, data, sv, n, k, group)
}

// wmatmul checks one case against the float64 product with the
// dequantized weight, the scales of int8 in groups in dtype sdt.
func (e *env) wmatmul(f kernels.WeightFormat, dt kernels.DType, c wmmCase, sdt kernels.DType) {
	x, xv := e.Input("x", dt, c.m, c.k)
	w, wv := e.qweight(f, c.n, c.k, c.group, sdt)
	var bias *kernels.Tensor
	var bv []float64
	if c.bias {
		bias, bv = e.Uniform("bias", kernels.F32, -1, 1, c.n)
	}
	want := make([]float64, c.m*c.n)
	for i := range c.m {
		for j := range c.n {
			var s float64
			for p := range c.k {
				s += xv[i*c.k+p] * wv[j*c.k+p]
			}
			if c.bias {
				s += bv[j]
			}
			want[i*c.n+j] = s
		}
	}
	out := e.Output(dt, c.m, c.n)
	err := e.weightQuant().WMatMul(out, x, w, bias)
	if f == kernels.WInt8 && c.group > 0 && e.b.Info().Kind == kernels.GPU {
		// The CUDA kernels take one int8 scale per row, and say so.
		require.ErrorIs(e, err, kernels.ErrUnsupported)
		return
	}
	require.NoError(e, err)
	e.Check("out", out, want, 0)
}

// wmatmulErrors checks that bad calls fail naming the op and argument.
func wmatmulErrors(e *env) {
	q := e.weightQuant()
	f32 := kernels.F32
	x, _ := e.Input("x", f32, 2, 128)
	w, _ := e.qweight(kernels.WInt4, 8, 128, 64, f32)
	out := e.Output(f32, 2, 8)
	bad := w
	bad.Group = 48
	e.requireOpErr(q.WMatMul(out, x, bad, nil), kernels.ErrShape, "WMatMul", "group 48")
	bad = w
	bad.Format = 9
	e.requireOpErr(q.WMatMul(out, x, bad, nil), kernels.ErrValue, "WMatMul", "weight format")
	bad = w
	bad.Format = kernels.WInt8
	e.requireOpErr(q.WMatMul(out, x, bad, nil), kernels.ErrShape, "WMatMul", "w.Data")
	e.requireOpErr(q.WMatMul(e.Output(kernels.F16, 2, 8), x, w, nil), kernels.ErrDType, "WMatMul", "out")
	e.requireOpErr(q.WMatMul(e.Output(f32, 2, 9), x, w, nil), kernels.ErrShape, "WMatMul", "out has shape")
	e.requireOpErr(q.WMatMul(out, x, w, e.Output(f32, 7)), kernels.ErrShape, "WMatMul", "bias")
	x2, _ := e.Input("x2", f32, 2, 96)
	e.requireOpErr(q.WMatMul(out, x2, w, nil), kernels.ErrShape, "WMatMul", "group 64 for K = 96")
	w8, _ := e.qweight(kernels.WInt8, 8, 128, 0, f32)
	bad = w8
	bad.Group = 48
	e.requireOpErr(q.WMatMul(out, x, bad, nil), kernels.ErrShape, "WMatMul", "group 48")
	bad.Group = 32
	e.requireOpErr(q.WMatMul(out, x, bad, nil), kernels.ErrShape, "WMatMul", "w.Scales")
	// Float16 scales are int8-in-groups only.
	w8.Scales, _ = e.Input("w8.Scales", kernels.F16, 8)
	e.requireOpErr(q.WMatMul(out, x, w8, nil), kernels.ErrDType, "WMatMul", "w.Scales is f16")
	bad = w
	bad.Scales, _ = e.Input("w4.Scales", kernels.F16, 8, 2)
	e.requireOpErr(q.WMatMul(out, x, bad, nil), kernels.ErrDType, "WMatMul", "w.Scales is f16")
}
