package kerneltest

import (
	"fmt"
	"math"

	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/kernels"
)

func init() { suites = append(suites, attentionTests()) }

// attnCase is one attention geometry with its masks.
type attnCase struct {
	batch, hq, hkv, sq, sk, d int
	causal                    bool
	lens                      []int32 // KeyLens, or nil
	scale                     float32 // 0 means 1/sqrt(d)
}

func (c attnCase) String() string {
	s := fmt.Sprintf("B%d_Hq%d_Hkv%d_Sq%d_Sk%d_D%d", c.batch, c.hq, c.hkv, c.sq, c.sk, c.d)
	if c.causal {
		s += "_causal"
	}
	if c.lens != nil {
		s += fmt.Sprintf("_lens%v", c.lens)
	}
	if c.scale != 0 {
		s += fmt.Sprintf("_scale%g", c.scale)
	}
	return s
}

var attnCases = []attnCase{
	{batch: 2, hq: 4, hkv: 2, sq: 31, sk: 31, d: 64, causal: true},         // GQA, causal
	{batch: 2, hq: 4, hkv: 4, sq: 31, sk: 31, d: 64, lens: []int32{17, 0}}, // padding, an empty row
	{batch: 2, hq: 4, hkv: 2, sq: 31, sk: 31, d: 64, causal: true, lens: []int32{31, 9}},
	{batch: 2, hq: 4, hkv: 2, sq: 1, sk: 31, d: 64, causal: true}, // decode
	{batch: 2, hq: 4, hkv: 1, sq: 1, sk: 31, d: 64, causal: true, lens: []int32{0, 20}},
	{batch: 1, hq: 2, hkv: 1, sq: 31, sk: 31, d: 1, causal: true},           // D = 1
	{batch: 1, hq: 3, hkv: 3, sq: 5, sk: 9, d: 7, causal: true, scale: 0.3}, // Sq < Sk
	{batch: 1, hq: 2, hkv: 2, sq: 9, sk: 4, d: 5, causal: true},             // Sq > Sk: empty rows
	{batch: 1, hq: 2, hkv: 1, sq: 1, sk: 4097, d: 64, causal: true, lens: []int32{4000}},
	{batch: 1, hq: 1, hkv: 1, sq: 1, sk: 1, d: 1},
	// Several blocks of 128 query rows and more tiles of 128 keys than a
	// GPU kernel's ring of stages holds, at both head sizes the fused
	// kernels take, with tails in every length.
	{batch: 1, hq: 2, hkv: 1, sq: 300, sk: 700, d: 128, causal: true},
	{batch: 2, hq: 2, hkv: 2, sq: 200, sk: 600, d: 64, lens: []int32{600, 130}},
	{batch: 1, hq: 2, hkv: 2, sq: 257, sk: 257, d: 128, causal: true, lens: []int32{200}},
	{batch: 2, hq: 2, hkv: 1, sq: 600, sk: 600, d: 64, causal: true, lens: []int32{600, 333}},
}

func (c attnCase) params(e *env) kernels.AttentionParams {
	p := kernels.AttentionParams{Scale: c.scale, Causal: c.causal}
	if c.lens != nil {
		p.KeyLens = e.Ints("KeyLens", c.lens, len(c.lens))
	}
	return p
}

// visible is how many leading keys query row i of batch entry b sees.
func (c attnCase) visible(i, b int) int {
	n := c.sk
	if c.causal {
		n = min(n, i+c.sk-c.sq+1)
	}
	if c.lens != nil {
		n = min(n, int(c.lens[b]))
	}
	return max(n, 0)
}

func (c attnCase) realScale() float64 {
	if c.scale == 0 {
		return 1 / math.Sqrt(float64(c.d))
	}
	return float64(c.scale)
}

// softmaxTest is one Softmax shape with its masks; the leading dimension of
// shape is the batch that lens indexes.
type softmaxTest struct {
	shape  []int
	causal bool
	lens   []int32
	scale  float32 // 0 means 1
}

var softmaxCases = []softmaxTest{
	{shape: []int{31, 31}},
	{shape: []int{1, 4097}, scale: 0.5},
	{shape: []int{1}},
	{shape: []int{2, 3, 31, 31}, causal: true, lens: []int32{31, 0}},
	{shape: []int{2, 4, 1, 31}, causal: true},
	{shape: []int{2, 31}, lens: []int32{5, 31}, scale: 2},
	{shape: []int{3, 5, 4}, causal: true}, // Sq > Sk: empty rows
}

func attentionTests() []test {
	var ts []test
	for _, dt := range kernels.FloatTypes {
		for _, c := range softmaxCases {
			ts = append(ts, test{name("Softmax", "dtype", dt, "shape", kernels.Shape(c.shape), "causal", c.causal, "lens", c.lens, "scale", c.scale), func(e *env) {
				x, xv := e.Uniform("x", dt, -4, 4, c.shape...)
				p := kernels.AttentionParams{Scale: c.scale, Causal: c.causal}
				if c.lens != nil {
					p.KeyLens = e.Ints("KeyLens", c.lens, len(c.lens))
				}
				out := e.Output(dt, c.shape...)
				require.NoError(e, e.b.Softmax(out, x, p))
				e.Check("out", out, refSoftmax(xv, c), 0)
			}})
		}
		for _, shape := range [][]int{{31, 31}, {1, 4097}, {2, 3, 1}} {
			ts = append(ts, test{name("SoftmaxBackward", "dtype", dt, "shape", kernels.Shape(shape)), func(e *env) {
				_, xv := e.Uniform("x", dt, -4, 4, shape...)
				y, yv := e.inputFromValues("y", dt, refSoftmax(xv, softmaxTest{shape: shape}), shape...)
				dy, dyv := e.Input("dy", dt, shape...)
				dx := e.Output(dt, shape...)
				require.NoError(e, e.b.SoftmaxBackward(dx, dy, y))
				e.Check("dx", dx, refSoftmaxBackward(dyv, yv, shape[len(shape)-1]), 0)
			}})
		}
		for _, c := range attnCases {
			qShape := []int{c.batch, c.hq, c.sq, c.d}
			kShape := []int{c.batch, c.hkv, c.sk, c.d}
			ts = append(ts,
				test{name("Attention", "dtype", dt, "case", c), func(e *env) {
					q, qv := e.Input("q", dt, qShape...)
					k, kv := e.Input("k", dt, kShape...)
					v, vv := e.Input("v", dt, kShape...)
					out := e.Output(dt, qShape...)
					require.NoError(e, e.b.Attention(out, q, k, v, c.params(e)))
					e.Check("out", out, refAttention(qv, kv, vv, c), 0)
				}},
				test{name("AttentionBackward", "dtype", dt, "case", c), func(e *env) {
					q, qv := e.Input("q", dt, qShape...)
					k, kv := e.Input("k", dt, kShape...)
					v, vv := e.Input("v", dt, kShape...)
					dout, dov := e.Input("dout", dt, qShape...)
					dq, dk, dv := e.Output(dt, qShape...), e.Output(dt, kShape...), e.Output(dt, kShape...)
					require.NoError(e, e.b.AttentionBackward(dq, dk, dv, dout, q, k, v, c.params(e)))
					wq, wk, wv := refAttentionBackward(dov, qv, kv, vv, c)
					e.Check("dq", dq, wq, 0)
					e.Check("dk", dk, wk, 0)
					e.Check("dv", dv, wv, 0)
				}},
			)
			if c.sq == c.sk { // self-attention: S queries over the same S keys
				ts = append(ts, test{name("AttentionPacked", "dtype", dt, "case", c), func(e *env) {
					heads := c.hq + 2*c.hkv
					qkv, qkvv := e.Input("qkv", dt, c.batch, c.sq, heads, c.d)
					out := e.Output(dt, c.batch, c.sq, c.hq, c.d)
					require.NoError(e, e.b.AttentionPacked(out, qkv, c.params(e)))
					q, k, v := splitPacked(qkvv, c)
					e.Check("out", out, mergeHeads(refAttention(q, k, v, c), c), 0)
				}})
			}
		}
	}
	return append(ts, test{"Attention/errors", attentionErrors})
}

// refSoftmax is the masked softmax of c applied to x of shape c.shape.
func refSoftmax(x []float64, c softmaxTest) []float64 {
	n := c.shape[len(c.shape)-1]
	rows := len(x) / n
	scale := 1.0
	if c.scale != 0 {
		scale = float64(c.scale)
	}
	out := make([]float64, len(x))
	for r := range rows {
		vis := n
		if c.causal || c.lens != nil {
			sq := c.shape[len(c.shape)-2]
			ac := attnCase{sq: sq, sk: n, causal: c.causal, lens: c.lens}
			vis = ac.visible(r%sq, r/(rows/c.shape[0]))
		}
		if vis == 0 {
			continue
		}
		row := x[r*n : r*n+vis]
		m := math.Inf(-1)
		for _, v := range row {
			m = max(m, scale*v)
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(scale*v - m)
		}
		for j, v := range row {
			out[r*n+j] = math.Exp(scale*v-m) / sum
		}
	}
	return out
}

// refSoftmaxBackward is y ⊙ (dy − Σ dy⊙y) per row.
func refSoftmaxBackward(dy, y []float64, n int) []float64 {
	dx := make([]float64, len(y))
	for r := range len(y) / n {
		var s float64
		for j := range n {
			s += dy[r*n+j] * y[r*n+j]
		}
		for j := range n {
			dx[r*n+j] = y[r*n+j] * (dy[r*n+j] - s)
		}
	}
	return dx
}

// probs returns the attention probabilities of query row i of head h of
// batch entry b: P[j] for j < visible, zeros after.
func (c attnCase) probs(q, k []float64, b, h, i int) []float64 {
	p := make([]float64, c.sk)
	n := c.visible(i, b)
	if n == 0 {
		return p
	}
	kh := b*c.hkv + h/(c.hq/c.hkv)
	qi := q[((b*c.hq+h)*c.sq+i)*c.d:][:c.d]
	m := math.Inf(-1)
	for j := range n {
		kj := k[(kh*c.sk+j)*c.d:][:c.d]
		var s float64
		for t := range c.d {
			s += qi[t] * kj[t]
		}
		p[j] = c.realScale() * s
		m = max(m, p[j])
	}
	var sum float64
	for j := range n {
		p[j] = math.Exp(p[j] - m)
		sum += p[j]
	}
	for j := range n {
		p[j] /= sum
	}
	return p
}

// refAttention is softmax(scale·q·kᵀ + mask)·v in float64.
func refAttention(q, k, v []float64, c attnCase) []float64 {
	out := make([]float64, len(q))
	for b := range c.batch {
		for h := range c.hq {
			kh := b*c.hkv + h/(c.hq/c.hkv)
			for i := range c.sq {
				p := c.probs(q, k, b, h, i)
				o := out[((b*c.hq+h)*c.sq+i)*c.d:][:c.d]
				for j, pj := range p {
					for t := range c.d {
						o[t] += pj * v[(kh*c.sk+j)*c.d+t]
					}
				}
			}
		}
	}
	return out
}

// refAttentionBackward is the analytic gradient of refAttention: with
// dP = dout·vᵀ and dS = P ⊙ (dP − Σ_j P⊙dP), dq = scale·dS·k,
// dk = scale·dSᵀ·q and dv = Pᵀ·dout, dk and dv summed over the query heads
// that share a KV head.
func refAttentionBackward(dout, q, k, v []float64, c attnCase) (dq, dk, dv []float64) {
	dq, dk, dv = make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
	scale := c.realScale()
	for b := range c.batch {
		for h := range c.hq {
			kh := b*c.hkv + h/(c.hq/c.hkv)
			for i := range c.sq {
				r := ((b*c.hq+h)*c.sq + i) * c.d
				p := c.probs(q, k, b, h, i)
				dp := make([]float64, c.sk)
				var delta float64
				for j := range c.sk {
					for t := range c.d {
						dp[j] += dout[r+t] * v[(kh*c.sk+j)*c.d+t]
					}
					delta += p[j] * dp[j]
				}
				for j := range c.sk {
					ds := p[j] * (dp[j] - delta)
					kj := (kh*c.sk + j) * c.d
					for t := range c.d {
						dq[r+t] += scale * ds * k[kj+t]
						dk[kj+t] += scale * ds * q[r+t]
						dv[kj+t] += p[j] * dout[r+t]
					}
				}
			}
		}
	}
	return dq, dk, dv
}

// splitPacked returns the queries [B, Hq, S, D] and the keys and values
// [B, Hkv, S, D] of a packed projection qkv [B, S, Hq+2·Hkv, D].
func splitPacked(qkv []float64, c attnCase) (q, k, v []float64) {
	heads := c.hq + 2*c.hkv
	q, k, v = make([]float64, c.batch*c.hq*c.sq*c.d), make([]float64, c.batch*c.hkv*c.sq*c.d), make([]float64, c.batch*c.hkv*c.sq*c.d)
	for b := range c.batch {
		for s := range c.sq {
			for h := range heads {
				src := qkv[((b*c.sq+s)*heads+h)*c.d:][:c.d]
				switch {
				case h < c.hq:
					copy(q[((b*c.hq+h)*c.sq+s)*c.d:], src)
				case h < c.hq+c.hkv:
					copy(k[((b*c.hkv+h-c.hq)*c.sq+s)*c.d:], src)
				default:
					copy(v[((b*c.hkv+h-c.hq-c.hkv)*c.sq+s)*c.d:], src)
				}
			}
		}
	}
	return q, k, v
}

// mergeHeads returns out [B, Hq, S, D] as [B, S, Hq, D].
func mergeHeads(out []float64, c attnCase) []float64 {
	m := make([]float64, len(out))
	for b := range c.batch {
		for h := range c.hq {
			for s := range c.sq {
				copy(m[((b*c.sq+s)*c.hq+h)*c.d:][:c.d], out[((b*c.hq+h)*c.sq+s)*c.d:][:c.d])
			}
		}
	}
	return m
}

func attentionErrors(e *env) {
	f32 := kernels.F32
	x, _ := e.Input("x", f32, 2, 3, 4)
	out := e.Output(f32, 2, 3, 4)
	lens := e.Ints("lens", []int32{3, 2}, 2)
	lensBad := e.Ints("lensBad", []int32{3, 5}, 2)
	lens3 := e.Ints("lens3", []int32{1, 2, 3}, 3)
	lensF, _ := e.Input("lensF", f32, 2)

	e.requireOpErr(e.b.Softmax(e.Output(f32, 2, 3, 5), x, kernels.AttentionParams{}), kernels.ErrShape, "Softmax", "out")
	e.requireOpErr(e.b.Softmax(e.Output(kernels.BF16, 2, 3, 4), x, kernels.AttentionParams{}), kernels.ErrDType, "Softmax", "out")
	e.requireOpErr(e.b.Softmax(out, x, kernels.AttentionParams{KeyLens: lensF}), kernels.ErrDType, "Softmax", "KeyLens")
	e.requireOpErr(e.b.Softmax(out, x, kernels.AttentionParams{KeyLens: lens3}), kernels.ErrShape, "Softmax", "KeyLens")
	e.requireDataErr(e.b.Softmax(out, x, kernels.AttentionParams{KeyLens: lensBad}), kernels.ErrValue, "Softmax", "KeyLens", "5")
	x1, _ := e.Input("x1", f32, 4)
	e.requireOpErr(e.b.Softmax(e.Output(f32, 4), x1, kernels.AttentionParams{Causal: true}), kernels.ErrShape, "Softmax", "x")
	e.requireOpErr(e.b.SoftmaxBackward(out, x, e.Output(f32, 2, 3)), kernels.ErrShape, "SoftmaxBackward", "dy")

	q, _ := e.Input("q", f32, 2, 4, 3, 8)
	k, _ := e.Input("k", f32, 2, 2, 5, 8)
	v, _ := e.Input("v", f32, 2, 2, 5, 8)
	k3, _ := e.Input("k3", f32, 2, 3, 5, 8)
	kD, _ := e.Input("kD", f32, 2, 2, 5, 7)
	vH, _ := e.Input("vH", kernels.F16, 2, 2, 5, 8)
	o := e.Output(f32, 2, 4, 3, 8)
	p := kernels.AttentionParams{Causal: true, KeyLens: lens}
	require.NoError(e, e.b.Attention(o, q, k, v, p))
	e.requireOpErr(e.b.Attention(o, q, k3, k3, p), kernels.ErrShape, "Attention", "heads")
	e.requireOpErr(e.b.Attention(o, q, kD, kD, p), kernels.ErrShape, "Attention", "k")
	e.requireOpErr(e.b.Attention(o, q, k, vH, p), kernels.ErrDType, "Attention", "v")
	e.requireOpErr(e.b.Attention(o, x, k, v, p), kernels.ErrShape, "Attention", "q")
	e.requireOpErr(e.b.Attention(e.Output(f32, 2, 4, 3, 9), q, k, v, p), kernels.ErrShape, "Attention", "out")
	e.requireOpErr(e.b.Attention(o, q, k, v, kernels.AttentionParams{KeyLens: lens3}), kernels.ErrShape, "Attention", "KeyLens")

	qkv, _ := e.Input("qkv", f32, 2, 3, 8, 8) // Hq 4, Hkv 2
	po := e.Output(f32, 2, 3, 4, 8)
	require.NoError(e, e.b.AttentionPacked(po, qkv, p))
	e.requireOpErr(e.b.AttentionPacked(po, x, p), kernels.ErrShape, "AttentionPacked", "qkv")
	e.requireOpErr(e.b.AttentionPacked(e.Output(f32, 2, 3, 3, 8), qkv, p), kernels.ErrShape, "AttentionPacked", "heads")
	e.requireOpErr(e.b.AttentionPacked(e.Output(f32, 2, 3, 8, 8), qkv, p), kernels.ErrShape, "AttentionPacked", "heads")
	e.requireOpErr(e.b.AttentionPacked(e.Output(f32, 2, 4, 4, 8), qkv, p), kernels.ErrShape, "AttentionPacked", "out")
	e.requireOpErr(e.b.AttentionPacked(e.Output(kernels.F16, 2, 3, 4, 8), qkv, p), kernels.ErrDType, "AttentionPacked", "out")
	e.requireOpErr(e.b.AttentionPacked(po, qkv, kernels.AttentionParams{KeyLens: lens3}), kernels.ErrShape, "AttentionPacked", "KeyLens")
	e.requireDataErr(e.b.AttentionPacked(po, qkv, kernels.AttentionParams{KeyLens: lensBad}), kernels.ErrValue, "AttentionPacked", "KeyLens", "5")
	// The same in bfloat16 with heads of 64, which a GPU's flash kernels
	// take, checking the lengths themselves.
	bq, _ := e.Input("bq", kernels.BF16, 2, 4, 3, 64)
	bk, _ := e.Input("bk", kernels.BF16, 2, 2, 4, 64)
	e.requireDataErr(e.b.Attention(e.Output(kernels.BF16, 2, 4, 3, 64), bq, bk, bk, kernels.AttentionParams{KeyLens: lensBad}),
		kernels.ErrValue, "Attention", "KeyLens", "5")
	bqkv, _ := e.Input("bqkv", kernels.BF16, 2, 3, 8, 64)
	e.requireDataErr(e.b.AttentionPacked(e.Output(kernels.BF16, 2, 3, 4, 64), bqkv, kernels.AttentionParams{KeyLens: lensBad}),
		kernels.ErrValue, "AttentionPacked", "KeyLens", "5")

	dq, dk, dv := e.Output(f32, 2, 4, 3, 8), e.Output(f32, 2, 2, 5, 8), e.Output(f32, 2, 2, 5, 8)
	require.NoError(e, e.b.AttentionBackward(dq, dk, dv, q, q, k, v, p))
	e.requireOpErr(e.b.AttentionBackward(dq, e.Output(f32, 2, 4, 5, 8), dv, q, q, k, v, p), kernels.ErrShape, "AttentionBackward", "dk")
	e.requireOpErr(e.b.AttentionBackward(dq, dk, nil, q, q, k, v, p), kernels.ErrShape, "AttentionBackward", "dv")
	e.requireOpErr(e.b.AttentionBackward(dq, dk, dv, k, q, k, v, p), kernels.ErrShape, "AttentionBackward", "dout")
}
