// Package layers holds the layers zbench's models share: the linear layer
// in every precision (float, int8 with static or per-token input scales,
// FP8, weight-only int8/int4/NF4), the scratch its quantized forms need,
// and the calibrator that fixes static input scales. A model wires layers
// to its architecture; a precision is a property of the layer's weight,
// written once here for every model.
package layers

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
)

// Linear is a linear layer, out = act(x·Wᵀ + b), plus a residual where one
// is added: its float weight, or once quantized one quantized form of it.
// BERT's, Llama's and ResNet's linears and LoRA's frozen projections are
// each one.
type Linear struct {
	// W is the float weight [out, in] (torch.nn.Linear's layout) and B
	// the bias [out] (nil where the layer has none); both nil once the
	// layer is quantized.
	W, B *kernels.Tensor
	// Q is the weight in int8 or FP8 codes; nil otherwise.
	Q *Quantized
	// WO is the weight-only quantized weight (kernels.WeightQuant); nil
	// otherwise.
	WO *kernels.QWeight
}

// Quantized is a weight in int8 or FP8 codes with one scale per output
// channel, and how its layer's input is quantized.
type Quantized struct {
	// W holds the codes, I8 or E4M3, [out, in] for a linear layer (a
	// convolution's [Co, Kh, Kw, Ci/G]); Scale, F32 [out], is each output
	// channel's scale for int8 codes and its inverse scale for FP8 ones:
	// either way w ≈ W·Scale.
	W, Scale *kernels.Tensor
	// InScale is the input's static int8 scale, F32 [1], fixed by
	// calibration; nil where the input is quantized per token as it
	// comes (int8 dynamic, FP8).
	InScale *kernels.Tensor
	// InCast is the input's delayed FP8 scaling (FP8 training: one scale
	// for the whole input, set by the recipe); nil otherwise.
	InCast *Cast
	// B is the bias in float32, nil where the layer has none.
	B *kernels.Tensor
}

// FP8 reports whether q's codes are FP8.
func (q *Quantized) FP8() bool { return q.W.DType() != kernels.I8 }

// Cast is a tensor's delayed FP8 scaling on the device: the scale its
// cast multiplies by and that scale's inverse, carried with the codes,
// and the amax the cast records; F32 [1] each.
type Cast struct {
	Scale, ScaleInv, Amax *kernels.Tensor
}

// Quantized reports whether l runs quantized (Q or WO).
func (l *Linear) Quantized() bool { return l.Q != nil || l.WO != nil }

// Scratch is the buffers a step's quantized linears need over its N rows:
// a quantized input's codes by the input's width (I8 or E4M3 [N, width]),
// the rows' scales of an input quantized per token (F32 [N]), and by the
// output's width the product a residual is then added to ([N, width] in
// the model's dtype). A model with no quantized layer needs none (nil).
type Scratch struct {
	Codes map[int]*kernels.Tensor
	Scale *kernels.Tensor
	Sum   map[int]*kernels.Tensor
}

// Input is a linear layer's input made ready for it by Prepare: X itself,
// and its codes where the layer is int8 or FP8. Linears that read the same
// input (query, key and value) share one Input.
type Input struct {
	X, Codes *kernels.Tensor
}

// Prepare returns x ready for l: for an int8 or FP8 layer, x quantized into
// s's codes of x's width (per tensor with the static scale, per token into
// s.Scale, or FP8 with the delayed cast), else x alone. The codes stay
// valid until the next Prepare of an input of the same width.
func (l *Linear) Prepare(be kernels.Backend, s *Scratch, x *kernels.Tensor) (Input, error) {
	in := Input{X: x}
	q := l.Q
	if q == nil {
		return in, nil
	}
	if s == nil || s.Codes[x.Shape().Last()] == nil {
		return in, fmt.Errorf("no buffer of codes for an input of shape %v: %w", x.Shape(), kernels.ErrShape)
	}
	in.Codes = s.Codes[x.Shape().Last()]
	var err error
	if q.FP8() {
		var f kernels.FP8
		if f, err = ops[kernels.FP8](be); err == nil && q.InCast != nil {
			err = f.CastFP8(in.Codes, q.InCast.Amax, x, q.InCast.Scale)
		} else if err == nil {
			err = f.CastFP8Rows(in.Codes, s.Scale, x)
		}
	} else {
		var o kernels.Quant
		if o, err = ops[kernels.Quant](be); err == nil && q.InScale != nil {
			err = o.Quantize(in.Codes, q.InScale, x, false)
		} else if err == nil {
			err = o.Quantize(in.Codes, s.Scale, x, true)
		}
	}
	if err != nil {
		return Input{X: x}, fmt.Errorf("quantizing the input: %w", err)
	}
	return in, nil
}

// Project sets out = act(x·Wᵀ + b) + res for in, prepared for l by Prepare:
// the float product (a residual accumulated by the product when out is
// res), or the int8, FP8 or weight-only product, rescaled, into s's sum of
// out's width when out is res, the residual added after it. res may be
// nil, out, or another tensor of out's shape.
func (l *Linear) Project(be kernels.Backend, s *Scratch, out *kernels.Tensor, in Input, act kernels.Activation, res *kernels.Tensor) error {
	if !l.Quantized() {
		p := kernels.MatMulParams{TransB: true, Bias: l.B, Act: act}
		if res != nil && out == res {
			p.Beta = 1
			return be.MatMul(out, in.X, l.W, p)
		}
		if err := be.MatMul(out, in.X, l.W, p); err != nil || res == nil {
			return err
		}
		return be.Add(out, out, res)
	}
	dst := out
	if res != nil && out == res {
		if s == nil || s.Sum[out.Shape().Last()] == nil {
			return fmt.Errorf("no buffer for a product of shape %v to add a residual to: %w", out.Shape(), kernels.ErrShape)
		}
		dst = s.Sum[out.Shape().Last()]
	}
	var err error
	switch q := l.Q; {
	case l.WO != nil:
		var w kernels.WeightQuant
		if w, err = ops[kernels.WeightQuant](be); err == nil {
			err = w.WMatMul(dst, in.X, *l.WO, nil)
		}
	case in.Codes == nil:
		err = fmt.Errorf("the input of a quantized layer was not prepared: %w", kernels.ErrValue)
	case q.FP8():
		aInv := s.Scale
		if q.InCast != nil {
			aInv = q.InCast.ScaleInv
		}
		var f kernels.FP8
		if f, err = ops[kernels.FP8](be); err == nil {
			err = f.FP8MatMul(dst, in.Codes, q.W, kernels.FP8MatMulParams{AScaleInv: aInv, BScaleInv: q.Scale, Bias: q.B, Act: act})
		}
	default:
		aScale := s.Scale
		if q.InScale != nil {
			aScale = q.InScale
		}
		var o kernels.Quant
		if o, err = ops[kernels.Quant](be); err == nil {
			err = o.QMatMul(dst, in.Codes, q.W, kernels.QMatMulParams{AScale: aScale, BScale: q.Scale, Bias: q.B, Act: act})
		}
	}
	if err != nil || res == nil {
		return err
	}
	return be.Add(out, dst, res)
}

// ops returns be's op group G for a layer already in a form of G: a form
// is made only where kernels.Group found the group (and, for FP8, the
// device able to run it), so every step asserts the interface alone, and
// only a backend without it pays for Group's error.
func ops[G any](be kernels.Backend) (G, error) {
	if g, ok := be.(G); ok {
		return g, nil
	}
	return kernels.Group[G](be)
}

// Pack packs the float weights of lins into the layout the backend's
// products read (kernels.LinearPacker), once, for a model that serves
// inference; nothing on a backend without the group. The weights must not
// change afterwards except through Upload.
func Pack(be kernels.Backend, lins ...*Linear) error {
	p, err := kernels.Group[kernels.LinearPacker](be)
	if err != nil {
		return nil
	}
	for _, l := range lins {
		if l.W == nil {
			continue
		}
		if err := p.PackLinear(l.W); err != nil {
			return err
		}
	}
	return nil
}
