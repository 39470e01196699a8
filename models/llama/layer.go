package llama

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
)

// The decoder layer's forward pass, one for inference (Session) and
// training (Trainer), as llm.c's gpt2_forward serves both its training
// step and validation. The two differ in the buffers they pass, in how
// attention is computed (against a KV cache, or causal over the step's
// own keys) and in what a projection is (the frozen weight alone, or with
// a LoRA branch added).

// layerBufs are the buffers of one decoder layer's forward pass over B
// sequences of S new tokens (N = B·S rows of width H):
//
//	h1 = RMSNorm(x)·g1              q, k, v = h1·Wqᵀ, h1·Wkᵀ, h1·Wvᵀ, q and k rotated
//	attT = attention(q, k, v)       x2 = x + attT·Woᵀ
//	h2 = RMSNorm(x2)·g2             gate, up = h2·Wgᵀ, h2·Wuᵀ
//	act = silu(gate)·up             out = x2 + act·Wdᵀ
//
// Inference runs in place and keeps nothing: x2 and out are x, h2 is h1
// and act is gate. Training gives each of them a buffer of its own per
// layer, which with the attention's inputs are what the backward reads.
type layerBufs struct {
	x, h1, x2, h2, out *kernels.Tensor // [N, H]
	q, k, v            *kernels.Tensor // [B, S, heads, D], rotated in place
	q2, k2, v2         *kernels.Tensor // [N, heads·D] views of q, k, v
	attT               *kernels.Tensor // [N, Hq·D]: the attention's output, heads merged
	gate, up, act      *kernels.Tensor // [N, I]
}

// linear is a decoder layer's linear module (q_proj … down_proj): its
// float weight [out, in] (torch.nn.Linear's layout) and no bias, or once
// the model is quantized its int8, FP8 or weight-only form.
type linear = layers.Linear

// projector applies decoder layer i's linear modules (q_proj … down_proj).
type projector struct {
	// one applies module lin to in, into out, adding to out's value when
	// residual is set. shared is set when in is the input of the previous
	// call, unchanged since (k_proj's and v_proj's after q_proj, up_proj's
	// after gate_proj): a quantized module's input is then quantized once.
	one func(i int, module string, out, in *kernels.Tensor, lin *linear, residual, shared bool) error
	// many, where not nil, applies modules that read one input (q_proj,
	// k_proj and v_proj; gate_proj and up_proj) at once, and reports
	// whether it took them.
	many func(outs []*kernels.Tensor, in *kernels.Tensor, lins []*linear) (bool, error)
}

// apply applies layer i's modules lins, which read in, into outs: at once
// through many where it takes them, else one by one, the later ones
// sharing the first's prepared input.
func (p projector) apply(i int, modules []string, outs []*kernels.Tensor, in *kernels.Tensor, lins []*linear) error {
	if p.many != nil {
		if done, err := p.many(outs, in, lins); done || err != nil {
			return err
		}
	}
	for j, lin := range lins {
		if err := p.one(i, modules[j], outs[j], in, lin, false, j > 0); err != nil {
			return fmt.Errorf("%s: %w", modules[j], err)
		}
	}
	return nil
}

// frozen is the projector of inference: the module's weight in whatever
// form it has, quantized ones over s, the step's scratch (nil when the
// model has no quantized module); modules reading one input whose weights
// are all float, with no bias, are one kernels.Ops.MatMulShared.
func frozen(be kernels.Backend, s *layers.Scratch) projector {
	var prepared layers.Input
	many := func(outs []*kernels.Tensor, in *kernels.Tensor, lins []*linear) (bool, error) {
		ws := make([]*kernels.Tensor, len(lins))
		for j, l := range lins {
			if l.Quantized() || l.B != nil {
				return false, nil
			}
			ws[j] = l.W
		}
		return true, be.MatMulShared(outs, in, ws)
	}
	return projector{many: many, one: func(_ int, module string, out, in *kernels.Tensor, l *linear, residual, shared bool) error {
		if l.Quantized() && s == nil {
			return fmt.Errorf("%s is quantized and the step has no buffers for it: %w", module, kernels.ErrValue)
		}
		if !shared || prepared.X != in || (prepared.Codes == nil) != (l.Q == nil) {
			var err error
			if prepared, err = l.Prepare(be, s, in); err != nil {
				return err
			}
		}
		var res *kernels.Tensor
		if residual {
			res = out
		}
		return l.Project(be, s, out, prepared, kernels.ActNone, res)
	}}
}

// layerForward runs decoder layer i over b: attend computes b.attT from
// the rotated b.q and b.k and from b.v; pos are the tokens' positions
// [B, S].
func (m *Model) layerForward(i int, b *layerBufs, pos *kernels.Tensor, proj projector, attend func() error) error {
	be, dec, l := m.be, m.dec, &m.w.layers[i]
	eps := float32(m.Config.RMSNormEps)
	ops := []struct {
		name string
		run  func() error
	}{
		{"input_layernorm", func() error { return be.RMSNorm(b.h1, b.x, l.attnNorm, eps) }},
		{"q_proj, k_proj, v_proj", func() error {
			return proj.apply(i, []string{"q_proj", "k_proj", "v_proj"}, []*kernels.Tensor{b.q2, b.k2, b.v2}, b.h1, []*linear{&l.q, &l.k, &l.v})
		}},
		{"rope q", func() error { return dec.RoPE(b.q, pos, m.invFreq) }},
		{"rope k", func() error { return dec.RoPE(b.k, pos, m.invFreq) }},
		{"attention", attend},
		{"residual", func() error { return copyInto(be, b.x2, b.x) }},
		{"o_proj", func() error { return proj.one(i, "o_proj", b.x2, b.attT, &l.o, true, false) }},
		{"post_attention_layernorm", func() error { return be.RMSNorm(b.h2, b.x2, l.mlpNorm, eps) }},
		{"gate_proj, up_proj", func() error {
			return proj.apply(i, []string{"gate_proj", "up_proj"}, []*kernels.Tensor{b.gate, b.up}, b.h2, []*linear{&l.gate, &l.up})
		}},
		{"silu·up", func() error { return dec.SwiGLU(b.act, b.gate, b.up) }},
		{"residual", func() error { return copyInto(be, b.out, b.x2) }},
		{"down_proj", func() error { return proj.one(i, "down_proj", b.out, b.act, &l.down, true, false) }},
	}
	for _, op := range ops {
		if err := op.run(); err != nil {
			return fmt.Errorf("llama: layer %d %s: %w", i, op.name, err)
		}
	}
	return nil
}

// copyInto sets dst = src, nothing when they are the same tensor.
func copyInto(be kernels.Backend, dst, src *kernels.Tensor) error {
	if dst == src {
		return nil
	}
	return be.Cast(dst, src)
}
