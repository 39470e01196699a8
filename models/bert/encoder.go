package bert

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/nn"
)

// The encoder's forward pass, one for inference (Forward) and training
// (Trainer), as llm.c's gpt2_forward serves both its training step and
// validation. The two differ only in the buffers they pass: inference
// runs each layer in place over one set of buffers and keeps nothing,
// training gives each layer its own input and output and keeps what the
// backward pass reads.

// encoderBufs are the buffers of the encoder's forward pass over B
// sequences of S tokens (N = B·S): the embeddings,
//
//	sum = word[ids] + position[pos] + type[typeIDs]    emb = LN(sum)
//
// then every layer, the first reading emb.
type encoderBufs struct {
	ids, typeIDs *kernels.Tensor // I32 token and token-type ids, [B, S] or [N]
	pos          *kernels.Tensor // I32 [S]: 0…S−1
	keyLens      *kernels.Tensor // I32 [B]: each sequence's tokens, for the attention mask
	posEmb       *kernels.Tensor // [S, H]
	sum, sum3    *kernels.Tensor // the embedding sum, shaped as ids plus H, and a [B, S, H] view
	emb          *kernels.Tensor // LN(sum), shaped as sum
	mean, rstd   *kernels.Tensor // that LayerNorm's statistics [N]; nil in inference
	layers       []layerBufs
}

// layerBufs are the buffers of one encoder layer's forward pass over N
// tokens of hidden size H and intermediate size I:
//
//	r1 = attention(x)·Woᵀ + bo + x    h1 = LN₁(r1)
//	u  = h1·W1ᵀ + b1                  f  = act(u)
//	r2 = f·W2ᵀ + b2 + h1              out = LN₂(r2)
//
// Inference runs in place and keeps nothing for a backward pass: r1 and
// out are x, r2 is h1 (the residual sums accumulate into them inside the
// matmuls), u is nil (the activation is fused into the matmul) and so are
// the layer norms' statistics; a float model's attention reads the stacked
// projection qkv in place, with no q, k, v or heads of their own. Training
// gives r1, r2, u, out and the
// statistics buffers of their own, which with x, the heads qh, kh, vh,
// the context a, h1 and f are what the backward reads.
type layerBufs struct {
	x, out         *kernels.Tensor // [N, H]
	q, k, v, a     *kernels.Tensor // [N, H]: the projections and the merged context
	q4, k4, v4, a4 *kernels.Tensor // [B, S, heads, hd] views of the same
	qc, kc, vc, ac *kernels.Tensor // float16 copies [B, S, heads, hd] when the attention runs in float16 (Mixed); nil otherwise
	qh, kh, vh, ah *kernels.Tensor // [B, heads, S, hd] in the attention dtype
	// qkv is the stacked projection [N, 3H] of a model with layer.qkv and
	// qkv4 its [B, S, 3·heads, hd] view, qkvc and a4c their float16
	// copies when the attention runs in float16 (Mixed); a4 is then where
	// AttentionPacked writes. nil where the projections are separate.
	qkv, qkv4, qkvc, a4c       *kernels.Tensor
	r1, h1, r2                 *kernels.Tensor // [N, H]
	u, f                       *kernels.Tensor // [N, I]
	mean1, rstd1, mean2, rstd2 *kernels.Tensor // [N]

	// scratch holds the quantized linears' inputs and sums (inference
	// of a quantized model, FP8 training); nil for float linears.
	scratch *layers.Scratch
	// observe, when set (calibration), is called with each site's input
	// before the linears read it.
	observe func(s site, x *kernels.Tensor) error
}

// input hands the input x of site s to the observer, if any, and returns
// it prepared for lin, one of the site's linears (layers.Linear.Prepare).
func (b *layerBufs) input(be kernels.Backend, s site, x *kernels.Tensor, lin *linear) (layers.Input, error) {
	if b.observe != nil {
		if err := b.observe(s, x); err != nil {
			return layers.Input{}, err
		}
	}
	return lin.Prepare(be, b.scratch, x)
}

// project sets out = act(x·wᵀ + b) through lin, with x from input, plus
// res where it is not nil (out may be res).
func (b *layerBufs) project(be kernels.Backend, out *kernels.Tensor, x layers.Input, lin *linear, act kernels.Activation, res *kernels.Tensor) error {
	return lin.Project(be, b.scratch, out, x, act, res)
}

// hidden is the encoder's output, last_hidden_state, as an [N, H] tensor.
func (e *encoderBufs) hidden() *kernels.Tensor { return e.layers[len(e.layers)-1].out }

// encode runs the encoder's forward pass with weights w over e.
func encode(be kernels.Backend, cfg Config, w *weights, e *encoderBufs) error {
	eps := float32(cfg.LayerNormEps)
	err := nn.RunSteps(
		func() error { return be.Embedding(e.sum, w.word, e.ids) },
		func() error { return be.Embedding(e.posEmb, w.pos, e.pos) },
		func() error { return be.Add(e.sum3, e.sum3, e.posEmb) },
		func() error { return be.Embedding(e.emb, w.typ, e.typeIDs) },
		func() error { return be.Add(e.sum, e.sum, e.emb) },
		func() error { return be.LayerNorm(e.emb, e.mean, e.rstd, e.sum, w.embLN.g, w.embLN.b, eps) },
	)
	if err != nil {
		return fmt.Errorf("bert: embeddings: %w", err)
	}
	attn := kernels.AttentionParams{KeyLens: e.keyLens}
	for i := range w.layers {
		if err := encoderLayer(be, &w.layers[i], &e.layers[i], eps, cfg.Act(), attn); err != nil {
			return fmt.Errorf("bert: layer %d: %w", i, err)
		}
	}
	return nil
}

// encoderLayer runs the forward pass of layer l over b.
func encoderLayer(be kernels.Backend, l *layer, b *layerBufs, eps float32, act kernels.Activation, attn kernels.AttentionParams) error {
	var err error
	if l.qkv.W != nil {
		err = stackedAttention(be, l, b, attn)
	} else {
		err = splitAttention(be, l, b, attn)
	}
	if err != nil {
		return err
	}
	x, err := b.input(be, siteAttnOut, b.a, &l.o)
	if err != nil {
		return err
	}
	if err := b.project(be, b.r1, x, &l.o, kernels.ActNone, b.x); err != nil {
		return err
	}
	if err := be.LayerNorm(b.h1, b.mean1, b.rstd1, b.r1, l.ln1.g, l.ln1.b, eps); err != nil {
		return err
	}
	if x, err = b.input(be, siteFFNIn, b.h1, &l.ffnIn); err != nil {
		return err
	}
	if b.u != nil { // training: the pre-activation is kept
		if err := b.project(be, b.u, x, &l.ffnIn, kernels.ActNone, nil); err != nil {
			return err
		}
		if err := be.Act(b.f, b.u, act); err != nil {
			return err
		}
	} else if err := b.project(be, b.f, x, &l.ffnIn, act, nil); err != nil {
		return err
	}
	if x, err = b.input(be, siteFFNOut, b.f, &l.ffnOut); err != nil {
		return err
	}
	if err := b.project(be, b.r2, x, &l.ffnOut, kernels.ActNone, b.h1); err != nil {
		return err
	}
	return be.LayerNorm(b.out, b.mean2, b.rstd2, b.r2, l.ln2.g, l.ln2.b, eps)
}

// stackedAttention sets b.a, the merged context, from b.x through the
// stacked projection l.qkv: one product and AttentionPacked over it, with
// no heads split or merged.
func stackedAttention(be kernels.Backend, l *layer, b *layerBufs, attn kernels.AttentionParams) error {
	x, err := b.input(be, siteQKV, b.x, &l.qkv)
	if err != nil {
		return err
	}
	if err := b.project(be, b.qkv, x, &l.qkv, kernels.ActNone, nil); err != nil {
		return err
	}
	if b.qkvc == nil {
		return be.AttentionPacked(b.a4, b.qkv4, attn)
	}
	if err := be.Cast(b.qkvc, b.qkv4); err != nil {
		return err
	}
	if err := be.AttentionPacked(b.a4c, b.qkvc, attn); err != nil {
		return err
	}
	return be.Cast(b.a4, b.a4c)
}

// splitAttention sets b.a, the merged context, from b.x through the
// separate query, key and value projections, their heads split for
// Attention and its output's merged.
func splitAttention(be kernels.Backend, l *layer, b *layerBufs, attn kernels.AttentionParams) error {
	x, err := b.input(be, siteQKV, b.x, &l.q)
	if err != nil {
		return err
	}
	for _, p := range [...]struct {
		flat, split, cast, heads *kernels.Tensor
		w                        *linear
	}{{b.q, b.q4, b.qc, b.qh, &l.q}, {b.k, b.k4, b.kc, b.kh, &l.k}, {b.v, b.v4, b.vc, b.vh, &l.v}} {
		if err := b.project(be, p.flat, x, p.w, kernels.ActNone, nil); err != nil {
			return err
		}
		src := p.split
		if p.cast != nil {
			if err := be.Cast(p.cast, p.split); err != nil {
				return err
			}
			src = p.cast
		}
		if err := be.SwapAxes(p.heads, src); err != nil {
			return err
		}
	}
	if err := be.Attention(b.ah, b.qh, b.kh, b.vh, attn); err != nil {
		return err
	}
	if b.ac != nil {
		if err := be.SwapAxes(b.ac, b.ah); err != nil {
			return err
		}
		return be.Cast(b.a4, b.ac)
	}
	return be.SwapAxes(b.a4, b.ah)
}
