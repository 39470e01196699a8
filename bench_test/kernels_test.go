package bench_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/kerneltest"
	"github.com/zbench/zbench/zbench"
)

// BERT-base dimensions.
const (
	bertHidden = 768
	bertHeads  = 12
	bertHeadD  = 64
	bertFFN    = 3072
	bertLNEps  = 1e-12
)

// kernelShapes are the (batch, seq) points the kernels run at.
func kernelShapes() [][2]int {
	if testing.Short() {
		return [][2]int{{1, 128}}
	}
	return [][2]int{{8, 128}, {8, 384}}
}

// kernelOp is one kernel workload at a (batch, seq) point.
type kernelOp struct {
	name string
	// setup allocates the operands and returns the op, its work and a
	// check of the output against a float64 reference.
	setup func(b *testing.B, dev kernels.Backend, dt kernels.DType, batch, seq int) (func() error, zbench.Workload, func() (float64, error))
}

var kernelOps = []kernelOp{
	{"relu", actSetup(kernels.ActReLU, 1)},
	{"gelu", actSetup(kernels.ActGELU, 8)},
	{"layernorm", layerNormSetup},
	{"softmax", softmaxSetup},
	{"attention", attentionSetup},
}

// BenchmarkKernels times single kernels at BERT-base shapes: activations on
// the FFN's [batch·seq, 3072], layernorm on [batch·seq, 768], softmax on the
// attention scores [batch, 12, seq, seq] and attention on q, k, v
// [batch, 12, seq, 64].
func BenchmarkKernels(b *testing.B) {
	for _, op := range kernelOps {
		for _, dev := range devices {
			for _, dt := range dtypes(kernels.F32, kernels.F16, kernels.BF16) {
				for _, s := range kernelShapes() {
					name := fmt.Sprintf("op=%s/dev=%s/dtype=%v/batch=%d/seq=%d", op.name, dev.Name(), dt, s[0], s[1])
					b.Run(name, func(b *testing.B) {
						run, work, verify := op.setup(b, dev, dt, s[0], s[1])
						zbench.Measure(b, zbench.Bench{Dev: dev, Work: work, Op: run, Verify: verify, MaxRelErr: kernels.Tolerance(dt)})
					})
				}
			}
		}
	}
}

// check downloads out and compares it with want.
func check(out *kernels.Tensor, want []float64) (float64, error) {
	got, err := kernels.ToFloat32(out)
	if err != nil {
		return 0, err
	}
	rel, _ := kernels.RelErr(widen(got), want)
	return rel, nil
}

func actSetup(act kernels.Activation, flopsPerElem float64) func(*testing.B, kernels.Backend, kernels.DType, int, int) (func() error, zbench.Workload, func() (float64, error)) {
	return func(b *testing.B, dev kernels.Backend, dt kernels.DType, batch, seq int) (func() error, zbench.Workload, func() (float64, error)) {
		n := batch * seq * bertFFN
		xv := uniform(10, dt, n)
		x := upload(b, dev, dt, xv, batch*seq, bertFFN)
		out := alloc(b, dev, dt, batch*seq, bertFFN)
		work := zbench.Workload{FLOPs: flopsPerElem * float64(n), Bytes: 2 * float64(n*dt.Size()), DType: dt}
		return func() error { return dev.Act(out, x, act) }, work, func() (float64, error) {
			want := widen(xv)
			for i, x := range want {
				want[i] = kerneltest.RefAct(act, x)
			}
			return check(out, want)
		}
	}
}

func layerNormSetup(b *testing.B, dev kernels.Backend, dt kernels.DType, batch, seq int) (func() error, zbench.Workload, func() (float64, error)) {
	rows, d := batch*seq, bertHidden
	xv, gv, bv := uniform(11, dt, rows*d), uniform(12, dt, d), uniform(13, dt, d)
	x := upload(b, dev, dt, xv, rows, d)
	gamma, beta := upload(b, dev, dt, gv, d), upload(b, dev, dt, bv, d)
	out := alloc(b, dev, dt, rows, d)
	work := zbench.Workload{FLOPs: 8 * float64(rows*d), Bytes: float64((2*rows*d + 2*d) * dt.Size()), DType: dt}
	return func() error { return dev.LayerNorm(out, nil, nil, x, gamma, beta, bertLNEps) }, work, func() (float64, error) {
		want, _, _ := kerneltest.RefLayerNorm(widen(xv), widen(gv), widen(bv), d, bertLNEps)
		return check(out, want)
	}
}

func softmaxSetup(b *testing.B, dev kernels.Backend, dt kernels.DType, batch, seq int) (func() error, zbench.Workload, func() (float64, error)) {
	n := batch * bertHeads * seq * seq
	xv := uniform(14, dt, n)
	x := upload(b, dev, dt, xv, batch, bertHeads, seq, seq)
	out := alloc(b, dev, dt, batch, bertHeads, seq, seq)
	work := zbench.Workload{FLOPs: 5 * float64(n), Bytes: 2 * float64(n*dt.Size()), DType: dt}
	return func() error { return dev.Softmax(out, x, kernels.AttentionParams{}) }, work, func() (float64, error) {
		want := make([]float64, n)
		for r := range n / seq {
			softmax64(want[r*seq:(r+1)*seq], widen(xv[r*seq:(r+1)*seq]))
		}
		return check(out, want)
	}
}

func attentionSetup(b *testing.B, dev kernels.Backend, dt kernels.DType, batch, seq int) (func() error, zbench.Workload, func() (float64, error)) {
	shape := []int{batch, bertHeads, seq, bertHeadD}
	n := batch * bertHeads * seq * bertHeadD
	qv, kv, vv := uniform(15, dt, n), uniform(16, dt, n), uniform(17, dt, n)
	q, k, v := upload(b, dev, dt, qv, shape...), upload(b, dev, dt, kv, shape...), upload(b, dev, dt, vv, shape...)
	out := alloc(b, dev, dt, shape...)
	work := zbench.Workload{
		FLOPs: 4 * float64(batch*bertHeads) * float64(seq) * float64(seq) * bertHeadD,
		Bytes: 4 * float64(n*dt.Size()),
		DType: dt,
	}
	return func() error { return dev.Attention(out, q, k, v, kernels.AttentionParams{}) }, work, func() (float64, error) {
		got, err := kernels.ToFloat32(out)
		if err != nil {
			return 0, err
		}
		// Every 7th query row of every head, recomputed in float64.
		var g, w []float64
		scores := make([]float64, seq)
		scale := 1 / math.Sqrt(bertHeadD)
		for bh := range batch * bertHeads {
			base := bh * seq * bertHeadD
			for i := 0; i < seq; i += 7 {
				for j := range seq {
					var dot float64
					for d := range bertHeadD {
						dot += float64(qv[base+i*bertHeadD+d]) * float64(kv[base+j*bertHeadD+d])
					}
					scores[j] = dot * scale
				}
				softmax64(scores, scores)
				for d := range bertHeadD {
					var sum float64
					for j := range seq {
						sum += scores[j] * float64(vv[base+j*bertHeadD+d])
					}
					g, w = append(g, float64(got[base+i*bertHeadD+d])), append(w, sum)
				}
			}
		}
		rel, _ := kernels.RelErr(g, w)
		return rel, nil
	}
}

// softmax64 writes the softmax of x into out (which may alias x).
func softmax64(out, x []float64) {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	var sum float64
	for i, v := range x {
		out[i] = math.Exp(v - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
}
