package kernels

import (
	"errors"
	"fmt"
	"math"
)

// AttentionDims is the geometry of a valid Attention or AttentionBackward
// call: q [B, Hq, Sq, D], k and v [B, Hkv, Sk, D].
type AttentionDims struct {
	B   int // batch size
	Hq  int // query heads, a multiple of Hkv
	Hkv int // key/value heads; query head h reads KV head h/(Hq/Hkv)
	Sq  int // query length
	Sk  int // key length
	D   int // head dimension
}

// AttentionScratch returns the elements of one score matrix [B, Hq, Sq, Sk]
// that AttentionByParts needs per scratch tensor.
func AttentionScratch(d AttentionDims) int { return d.B * d.Hq * d.Sq * d.Sk }

// AttentionByParts computes Attention from the other operations: a batched
// MatMul for the scores, Softmax with the masks, and a MatMul with v. It
// is the fallback of backends without a fused kernel for a dtype or head
// size. scratch is two tensors of AttentionScratch(d) elements in q's
// dtype (scores, then probabilities); the probabilities stay in scratch[1]. Grouped
// KV heads need no copies: the Hq/Hkv query heads that share a KV head are
// contiguous, so q is viewed as [B·Hkv, G·Sq, D] against k [B·Hkv, Sk, D].
func AttentionByParts(o Ops, out, q, k, v *Tensor, scratch [2]*Tensor, p AttentionParams, d AttentionDims) error {
	g := d.Hq / d.Hkv
	p.Scale = AttentionScale(p, d)
	qv, kv, vv, ov, sv, err := attentionViews(d, g, q, k, v, out, scratch[0])
	if err != nil {
		return err
	}
	if err := o.MatMul(sv, qv, kv, MatMulParams{TransB: true, Alpha: p.Scale}); err != nil {
		return fmt.Errorf("attention scores: %w", err)
	}
	s4, err1 := scratch[0].Reshape(d.B, d.Hq, d.Sq, d.Sk)
	p4, err2 := scratch[1].Reshape(d.B, d.Hq, d.Sq, d.Sk)
	pv, err3 := scratch[1].Reshape(d.B*d.Hkv, g*d.Sq, d.Sk)
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("attention views: %w", err)
	}
	if err := o.Softmax(p4, s4, AttentionParams{Causal: p.Causal, KeyLens: p.KeyLens}); err != nil {
		return fmt.Errorf("attention softmax: %w", err)
	}
	if err := o.MatMul(ov, pv, vv, MatMulParams{}); err != nil {
		return fmt.Errorf("attention output: %w", err)
	}
	return nil
}

// AttentionBackwardByParts computes AttentionBackward the same way, with
// three scratch tensors of AttentionScratch(d) elements in q's dtype: the
// probabilities are recomputed, then dV = Pᵀ·dO, dP = dO·Vᵀ,
// dS = softmax'(dP), dQ = scale·dS·K and dK = scale·dSᵀ·Q.
func AttentionBackwardByParts(o Ops, dq, dk, dv, dout, q, k, v *Tensor, scratch [3]*Tensor, p AttentionParams, d AttentionDims) error {
	g := d.Hq / d.Hkv
	pr, dp, ds := scratch[0], scratch[1], scratch[2]
	// dq is free until the end: it takes the forward output.
	if err := AttentionByParts(o, dq, q, k, v, [2]*Tensor{dp, pr}, p, d); err != nil {
		return err
	}
	qv, kv, vv, dov, pv, err := attentionViews(d, g, q, k, v, dout, pr)
	if err != nil {
		return err
	}
	view := func(t *Tensor, dims ...int) *Tensor {
		if err != nil {
			return nil
		}
		var r *Tensor
		r, err = t.Reshape(dims...)
		return r
	}
	bh := d.B * d.Hkv
	dpv, dsv := view(dp, bh, g*d.Sq, d.Sk), view(ds, bh, g*d.Sq, d.Sk)
	dqv, dkv, dvv := view(dq, bh, g*d.Sq, d.D), view(dk, bh, d.Sk, d.D), view(dv, bh, d.Sk, d.D)
	if err != nil {
		return err
	}
	scale := AttentionScale(p, d)
	steps := []struct {
		name string
		run  func() error
	}{
		{"dV", func() error { return o.MatMul(dvv, pv, dov, MatMulParams{TransA: true}) }},
		{"dP", func() error { return o.MatMul(dpv, dov, vv, MatMulParams{TransB: true}) }},
		{"dS", func() error { return o.SoftmaxBackward(dsv, dpv, pv) }},
		{"dQ", func() error { return o.MatMul(dqv, dsv, kv, MatMulParams{Alpha: scale}) }},
		{"dK", func() error { return o.MatMul(dkv, dsv, qv, MatMulParams{TransA: true, Alpha: scale}) }},
	}
	for _, st := range steps {
		if err := st.run(); err != nil {
			return fmt.Errorf("attention backward %s: %w", st.name, err)
		}
	}
	return nil
}

// AttentionScale returns p.Scale, or 1/√D when it is 0.
func AttentionScale(p AttentionParams, d AttentionDims) float32 {
	if p.Scale == 0 {
		return float32(1 / math.Sqrt(float64(d.D)))
	}
	return p.Scale
}

// attentionViews returns q, k, v, o and the scores s viewed per KV head.
func attentionViews(d AttentionDims, g int, q, k, v, o, s *Tensor) (qv, kv, vv, ov, sv *Tensor, err error) {
	bh := d.B * d.Hkv
	for _, x := range []struct {
		dst  **Tensor
		src  *Tensor
		dims []int
	}{
		{&qv, q, []int{bh, g * d.Sq, d.D}},
		{&kv, k, []int{bh, d.Sk, d.D}},
		{&vv, v, []int{bh, d.Sk, d.D}},
		{&ov, o, []int{bh, g * d.Sq, d.D}},
		{&sv, s, []int{bh, g * d.Sq, d.Sk}},
	} {
		if *x.dst, err = x.src.Reshape(x.dims...); err != nil {
			return nil, nil, nil, nil, nil, fmt.Errorf("attention views: %w", err)
		}
	}
	return qv, kv, vv, ov, sv, nil
}
