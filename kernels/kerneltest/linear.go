package kerneltest

import "github.com/zbench/zbench/kernels"

func init() { suites = append(suites, linearTests()) }

// linearTests check kernels.MatMulBackward, the linear layer's backward
// composed from MatMul and SumRows, on every float dtype.
func linearTests() []test {
	var ts []test
	for _, dt := range kernels.FloatTypes {
		for _, d := range [][3]int{{1, 1, 1}, {31, 17, 33}, {4097, 3, 5}} {
			ts = append(ts, test{name("linear_backward", "dtype", dt, "rows", d[0], "n", d[1], "k", d[2]), func(e *env) {
				e.linearBackward(dt, d[0], d[1], d[2])
			}})
		}
	}
	return ts
}

// linearBackward checks da = dout·w, dw = doutᵀ·a, dbias = Σ dout for
// out = a·wᵀ + bias with a [rows, k], w [n, k].
func (e *env) linearBackward(dt kernels.DType, rows, n, k int) {
	a, av := e.Input("a", dt, rows, k)
	w, wv := e.Input("w", dt, n, k)
	dout, dv := e.Input("dout", dt, rows, n)
	da, dw, dbias := e.Output(dt, rows, k), e.Output(dt, n, k), e.Output(dt, n)
	if err := kernels.MatMulBackward(e.b, da, dw, dbias, dout, a, w, false); err != nil {
		e.Fatal(err)
	}
	wantDA, wantDW, wantDB := make([]float64, rows*k), make([]float64, n*k), make([]float64, n)
	for r := range rows {
		for j := range n {
			g := dv[r*n+j]
			wantDB[j] += g
			for p := range k {
				wantDA[r*k+p] += g * wv[j*k+p]
				wantDW[j*k+p] += g * av[r*k+p]
			}
		}
	}
	e.Check("da", da, wantDA, 0)
	e.Check("dw", dw, wantDW, 0)
	e.Check("dbias", dbias, wantDB, 0)
}

func init() {
	suites = append(suites, []test{{"capture", func(e *env) { e.capture() }}})
}

// capture checks that a captured graph, when the backend has one, replays
// the operations it recorded.
func (e *env) capture() {
	c := optionalGroup[kernels.Capturer](e)
	x, xv := e.Input("x", kernels.F32, 31)
	out := e.Output(kernels.F32, 31)
	g, err := c.Capture(func() error { return e.b.Scale(out, x, 2) })
	if err != nil {
		e.Fatal(err)
	}
	defer g.Close()
	if err := g.Launch(); err != nil {
		e.Fatal(err)
	}
	want := make([]float64, len(xv))
	for i, v := range xv {
		want[i] = 2 * v
	}
	e.Check("out", out, want, 0)
}
