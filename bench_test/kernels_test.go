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
// [batch, 12, seq, 64]; and conv2d at ResNet-50's layer shapes
// (resnetConvLayers).
func BenchmarkKernels(b *testing.B) {
	for _, op := range kernelOps {
		for _, dev := range devices {
			for _, dt := range dtypes(kernels.F32, kernels.F16, kernels.BF16) {
				for _, s := range kernelShapes() {
					for _, cache := range cacheModes(dev) {
						name := fmt.Sprintf("op=%s/dev=%s/dtype=%v/batch=%d/seq=%d%s", op.name, dev.Name(), dt, s[0], s[1], cache)
						b.Run(name, func(b *testing.B) {
							run, work, verify := op.setup(b, dev, dt, s[0], s[1])
							zbench.Measure(b, zbench.Bench{Dev: dev, Work: work, Op: run, Verify: verify,
								MaxRelErr: kernels.Tolerance(dt), Cold: cache == "/cache=cold"})
						})
					}
				}
			}
		}
	}
	benchConvLayers(b)
}

// cacheModes are the name suffixes of the cache states a kernel runs in:
// hot (the previous iteration's data in cache) and cold (the cache
// flushed before each launch) on devices that can flush it, none on others.
func cacheModes(dev kernels.Backend) []string {
	if _, err := kernels.Group[kernels.CacheFlusher](dev); err == nil {
		return []string{"/cache=hot", "/cache=cold"}
	}
	return []string{""}
}

// attentionShapes are the long-sequence points of BenchmarkAttention: the
// FlashAttention papers' setting of 16k tokens per batch and a model width
// of 2048 on GPUs, and one BERT-sized point on CPUs.
func attentionShapes(dev kernels.Backend) []attnShape {
	if dev.Info().Kind != kernels.GPU {
		if testing.Short() {
			return []attnShape{{batch: 1, heads: 4, seq: 128, hdim: 64}}
		}
		return []attnShape{{batch: 1, heads: 12, seq: 512, hdim: 64}, {batch: 1, heads: 12, seq: 512, hdim: 64, causal: true}}
	}
	if testing.Short() {
		return []attnShape{{batch: 16, heads: 16, seq: 1024, hdim: 128}}
	}
	var ss []attnShape
	for _, hdim := range []int{64, 128} {
		for _, seq := range []int{1024, 4096} {
			for _, causal := range []bool{false, true} {
				ss = append(ss, attnShape{batch: 16384 / seq, heads: 2048 / hdim, seq: seq, hdim: hdim, causal: causal})
			}
		}
	}
	return ss
}

// BenchmarkAttention times the attention forward at long sequences: the
// flash-attention kernel on GPUs (16-bit), the composed path elsewhere.
func BenchmarkAttention(b *testing.B) {
	for _, dev := range devices {
		dts := dtypes(kernels.F32)
		if dev.Info().Kind == kernels.GPU {
			dts = dtypes(kernels.F16, kernels.BF16)
		}
		for _, dt := range dts {
			for _, s := range attentionShapes(dev) {
				name := fmt.Sprintf("dev=%s/dtype=%v/batch=%d/heads=%d/seq=%d/hdim=%d/causal=%v",
					dev.Name(), dt, s.batch, s.heads, s.seq, s.hdim, s.causal)
				b.Run(name, func(b *testing.B) {
					run, work, verify := attentionBench(b, dev, dt, s, max(1, s.seq/16))
					zbench.Measure(b, zbench.Bench{Dev: dev, Work: work, Op: run, Verify: verify, MaxRelErr: kernels.Tolerance(dt)})
				})
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
	return attentionBench(b, dev, dt, attnShape{batch: batch, heads: bertHeads, seq: seq, hdim: bertHeadD}, 7)
}

// attnShape is a self-attention workload: q, k, v [batch, heads, seq, hdim].
type attnShape struct {
	batch, heads, seq, hdim int
	causal                  bool
}

// attentionBench sets up Attention on s and a check of every rowStep-th
// query row of every head against a float64 reference.
func attentionBench(b *testing.B, dev kernels.Backend, dt kernels.DType, s attnShape, rowStep int) (func() error, zbench.Workload, func() (float64, error)) {
	shape := []int{s.batch, s.heads, s.seq, s.hdim}
	n := s.batch * s.heads * s.seq * s.hdim
	qv, kv, vv := uniform(15, dt, n), uniform(16, dt, n), uniform(17, dt, n)
	q, k, v := upload(b, dev, dt, qv, shape...), upload(b, dev, dt, kv, shape...), upload(b, dev, dt, vv, shape...)
	out := alloc(b, dev, dt, shape...)
	flops := 4 * float64(s.batch*s.heads) * float64(s.seq) * float64(s.seq) * float64(s.hdim)
	if s.causal { // only the lower triangle of the scores is computed
		flops /= 2
	}
	work := zbench.Workload{FLOPs: flops, Bytes: 4 * float64(n*dt.Size()), DType: dt}
	p := kernels.AttentionParams{Causal: s.causal}
	return func() error { return dev.Attention(out, q, k, v, p) }, work, func() (float64, error) {
		got, err := kernels.ToFloat32(out)
		if err != nil {
			return 0, err
		}
		var g, w []float64
		scores := make([]float64, s.seq)
		scale := 1 / math.Sqrt(float64(s.hdim))
		d := s.hdim
		for bh := range s.batch * s.heads {
			base := bh * s.seq * d
			for i := 0; i < s.seq; i += rowStep {
				keys := s.seq
				if s.causal {
					keys = i + 1
				}
				for j := range keys {
					var dot float64
					for t := range d {
						dot += float64(qv[base+i*d+t]) * float64(kv[base+j*d+t])
					}
					scores[j] = dot * scale
				}
				softmax64(scores[:keys], scores[:keys])
				for t := range d {
					var sum float64
					for j := range keys {
						sum += scores[j] * float64(vv[base+j*d+t])
					}
					g, w = append(g, float64(got[base+i*d+t])), append(w, sum)
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
