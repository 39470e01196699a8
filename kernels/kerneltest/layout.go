package kerneltest

import (
	"bytes"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, layoutTests()) }

// swapShapes are the shapes of x [A, B, C, D] in the SwapAxes tests:
// degenerate axes, an innermost axis of one element, odd sizes, the head
// split and merge of attention ([batch, seq, heads, hdim] and back), one
// large enough to be split across goroutines, and images between NCHW and
// NHWC (rows of one element) large enough to be split too.
var swapShapes = [][]int{
	{1, 1, 1, 1}, {2, 3, 4, 5}, {3, 7, 5, 1}, {1, 4097, 3, 2}, {5, 1, 9, 3},
	{2, 31, 12, 64}, {2, 12, 31, 64}, {4, 128, 12, 64}, {2, 3, 9001, 1}, {2, 9001, 3, 1},
}

// swapTypes are the dtypes SwapAxes takes.
var swapTypes = []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.I32}

func layoutTests() []test {
	var ts []test
	for _, dt := range swapTypes {
		for _, shape := range swapShapes {
			ts = append(ts, test{name("SwapAxes", "dtype", dt, "x", kernels.Shape(shape)), func(e *env) { e.swapAxes(dt, shape) }})
		}
	}
	return append(ts, test{"SwapAxes/errors", swapAxesErrors})
}

// refSwapAxes returns out [A, C, B, D] with out[a, c, b, d] = x[a, b, c, d]
// for the bytes of x [A, B, C, D] with elements of size bytes.
func refSwapAxes(x []byte, shape []int, size int) []byte {
	a, b, c, d := shape[0], shape[1], shape[2], shape[3]
	out := make([]byte, len(x))
	for i := range a {
		for j := range b {
			for k := range c {
				for l := range d {
					src := (((i*b+j)*c+k)*d + l) * size
					dst := (((i*c+k)*b+j)*d + l) * size
					copy(out[dst:dst+size], x[src:src+size])
				}
			}
		}
	}
	return out
}

// swapAxes checks that SwapAxes moves every element of x, bit for bit.
func (e *env) swapAxes(dt kernels.DType, shape []int) {
	e.Helper()
	n := kernels.Shape(shape).Len()
	var x *kernels.Tensor
	if dt == kernels.I32 {
		vals := make([]int32, n)
		for i := range vals {
			vals[i] = int32(e.rng.Uint32()) // the full range: not exact in float32
		}
		x = e.Ints("x", vals, shape...)
	} else {
		x, _ = e.Uniform("x", dt, -100, 100, shape...)
	}
	xb := e.inputs[len(e.inputs)-1].data
	out := e.Output(dt, shape[0], shape[2], shape[1], shape[3])
	require.NoError(e, e.b.SwapAxes(out, x))
	e.CheckBytes("out", out, refSwapAxes(xb, shape, dt.Size()))
}

// CheckBytes downloads out and requires its storage to equal want exactly,
// naming the first element that differs.
func (e *env) CheckBytes(name string, out *kernels.Tensor, want []byte) {
	e.Helper()
	require.NoError(e, e.b.Sync())
	got := make([]byte, out.Bytes())
	require.NoError(e, e.b.Download(got, out), "download %s", name)
	require.Len(e, want, len(got), "%s length", name)
	if bytes.Equal(got, want) {
		return
	}
	size := out.DType().Size()
	for i := 0; i < len(got); i += size {
		if !bytes.Equal(got[i:i+size], want[i:i+size]) {
			require.Failf(e, "wrong element", "%s element %d of %v: got bytes %x, want %x", name, i/size, out, got[i:i+size], want[i:i+size])
		}
	}
}

func swapAxesErrors(e *env) {
	f32 := kernels.F32
	x, _ := e.Input("x", f32, 2, 3, 3, 4)
	x3, _ := e.Input("x3", f32, 2, 3, 4)
	x16, _ := e.Input("x16", kernels.F16, 2, 3, 3, 4)
	x8, _ := e.Input("x8", kernels.I8, 2, 3, 3, 4)
	view, err := x.Reshape(2, 3, 3, 4)
	require.NoError(e, err)
	out := e.Output(f32, 2, 3, 3, 4)
	e.checkErrors("swapaxes", []errCase{
		{"nil x", kernels.ErrShape, func() error { return e.b.SwapAxes(out, nil) }},
		{"nil out", kernels.ErrShape, func() error { return e.b.SwapAxes(nil, x) }},
		{"rank 3", kernels.ErrShape, func() error { return e.b.SwapAxes(e.Output(f32, 2, 4, 3), x3) }},
		{"rank 5", kernels.ErrShape, func() error { return e.b.SwapAxes(e.Output(f32, 1, 2, 3, 3, 4), e.Output(f32, 1, 2, 3, 3, 4)) }},
		{"out shape", kernels.ErrShape, func() error { return e.b.SwapAxes(e.Output(f32, 2, 3, 4, 3), x) }},
		{"out dtype", kernels.ErrDType, func() error { return e.b.SwapAxes(out, x16) }},
		{"int8", kernels.ErrDType, func() error { return e.b.SwapAxes(e.Output(kernels.I8, 2, 3, 3, 4), x8) }},
		{"in place", kernels.ErrValue, func() error { return e.b.SwapAxes(x, x) }},
		{"into a view of x", kernels.ErrValue, func() error { return e.b.SwapAxes(view, x) }},
	})
	e.requireOpErr(e.b.SwapAxes(e.Output(f32, 2, 3, 4), x3), kernels.ErrShape, "SwapAxes", "x", "[2 3 4]")
	require.NoError(e, e.b.SwapAxes(out, x), "the same tensors in a valid call")
}
