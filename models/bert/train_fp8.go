package bert

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/fp8"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/nn"
)

// FP8 training of the encoder's linear layers, as Transformer Engine's
// Linear runs under fp8_autocast with a DelayedScaling recipe, over the
// bfloat16 mixed precision of the rest of the model:
//
//	forward   y  = x·Wᵀ + b       x, W in E4M3
//	dgrad     dx = dy·W           dy in E5M2, W (transposed) in E4M3
//	wgrad     dW = dyᵀ·x          dy, x (transposed) in E5M2 and E4M3
//
// each FP8 GEMM summing in float32 and writing bfloat16, the bias in
// float32 (the master). Every cast tensor has its own delayed scale — a
// layer's input (query, key and value share theirs), each weight, each
// output gradient — taken at the start of a step from the amaxes that
// the casts of earlier steps recorded (fp8.Meta), scale 1 at the first
// step; at the end of a step the amaxes are read back and the scales
// updated. A transposed operand is cast with the scale of its plain
// cast, so its codes are the plain codes transposed. The embeddings, the
// layer norms, the attention core and the masked-LM head stay in
// bfloat16, as under Transformer Engine.

// The linear layers of an encoder layer, in the order of fp8Trainer's
// rows.
const (
	linQ = iota
	linK
	linV
	linO
	linIn
	linOut
	numLinears
)

// linears returns l's linear layers in the order of the lin constants.
func (l *layer) linears() [numLinears]*linear {
	return [numLinears]*linear{&l.q, &l.k, &l.v, &l.o, &l.ffnIn, &l.ffnOut}
}

// linearNames are the names of a layer's linears (under
// encoder.layer.N.), in the order of the lin constants.
var linearNames = [numLinears]string{siteLinears[siteQKV][0], siteLinears[siteQKV][1], siteLinears[siteQKV][2],
	siteLinears[siteAttnOut][0], siteLinears[siteFFNIn][0], siteLinears[siteFFNOut][0]}

// scaledCast is one cast tensor's delayed scaling on the device: the
// scale the cast multiplies by and its inverse, carried with the codes
// (F32 [1] each, set from meta at the start of each step where it
// changed), and the amax the cast records (F32 [1]).
type scaledCast struct {
	meta *fp8.Meta
	layers.Cast
	uploaded float32 // the scale the device holds; 0 before the first upload
}

// fp8Linear is one linear layer's FP8 state in training.
type fp8Linear struct {
	lin     *linear     // the trainer's: w the bfloat16 weight [out, in]
	x       *scaledCast // its input's, shared by query, key and value
	w, dy   *scaledCast
	wq, wtq *kernels.Tensor // the weight and its transpose [in, out] in E4M3, cast at the start of each step
}

// fp8Trainer is a Trainer's FP8 state: every linear layer's, and the
// scratch of the casts, by width (H or I) or, for a transposed weight,
// by its shape.
type fp8Trainer struct {
	t     *Trainer
	ops   kernels.FP8
	bufs  *nn.TensorSet
	lins  [][numLinears]*fp8Linear
	casts []*scaledCast // every cast, in the order of allocation

	xq        map[int]*kernels.Tensor    // E4M3 [N, w]: a layer's input in the forward
	dyq       map[int]*kernels.Tensor    // E5M2 [N, w]: an output gradient
	xT, dyT   map[int]*kernels.Tensor    // [w, N] in the trainer's dtype: transposes
	xTq, dyTq map[int]*kernels.Tensor    // their casts, E4M3 and E5M2
	dx        map[int]*kernels.Tensor    // [N, w]: a dgrad before it is added
	wT        map[[2]int]*kernels.Tensor // [in, out]: a transposed weight
	// xTqOf is what xTq holds by width, the input cast, so that query,
	// key and value, which read one input with one cast, transpose and
	// cast it once a step.
	xTqOf map[int]castInput
}

// castInput is a layer input and the cast it is cast with.
type castInput struct {
	x *kernels.Tensor
	c *scaledCast
}

// newFP8Trainer makes every linear layer of t's encoder FP8 under r.
func newFP8Trainer(t *Trainer, r fp8.DelayedScaling) (*fp8Trainer, error) {
	ops, err := kernels.Group[kernels.FP8](t.be)
	if err != nil {
		return nil, err
	}
	f := &fp8Trainer{t: t, ops: ops, bufs: nn.NewTensorSet(t.be),
		xq: map[int]*kernels.Tensor{}, dyq: map[int]*kernels.Tensor{}, xT: map[int]*kernels.Tensor{}, dyT: map[int]*kernels.Tensor{},
		xTq: map[int]*kernels.Tensor{}, dyTq: map[int]*kernels.Tensor{}, dx: map[int]*kernels.Tensor{}, wT: map[[2]int]*kernels.Tensor{},
		xTqOf: map[int]castInput{}}
	if err := f.alloc(r); err != nil {
		return nil, errors.Join(err, f.bufs.Free())
	}
	return f, nil
}

func (f *fp8Trainer) alloc(r fp8.DelayedScaling) error {
	t := f.t
	N, H, I := t.Batch*t.Seq, t.Config.HiddenSize, t.Config.IntermediateSize
	a := nn.Allocator{Set: f.bufs}
	for _, w := range []int{H, I} {
		f.xq[w], f.dyq[w] = a.Tensor(kernels.E4M3, N, w), a.Tensor(kernels.E5M2, N, w)
		f.xT[w], f.dyT[w], f.dx[w] = a.Tensor(t.dt, w, N), a.Tensor(t.dt, w, N), a.Tensor(t.dt, N, w)
		f.xTq[w], f.dyTq[w] = a.Tensor(kernels.E4M3, w, N), a.Tensor(kernels.E5M2, w, N)
	}
	if err := a.Err(); err != nil {
		return err
	}
	newCast := func(dt kernels.DType) (*scaledCast, error) {
		m, err := r.NewMeta(dt)
		if err != nil {
			return nil, err
		}
		c := &scaledCast{meta: m, Cast: layers.Cast{Scale: a.Tensor(kernels.F32, 1), ScaleInv: a.Tensor(kernels.F32, 1), Amax: a.Tensor(kernels.F32, 1)}}
		f.casts = append(f.casts, c)
		return c, a.Err()
	}
	for i := range t.w.layers {
		l, b := &t.w.layers[i], &t.enc.layers[i]
		b.scratch = &layers.Scratch{Codes: f.xq}
		var row [numLinears]*fp8Linear
		var x *scaledCast
		for j, lin := range l.linears() {
			var err error
			if j <= linV && x == nil || j > linV {
				if x, err = newCast(kernels.E4M3); err != nil {
					return err
				}
			}
			fl := &fp8Linear{lin: lin, x: x}
			if fl.w, err = newCast(kernels.E4M3); err != nil {
				return err
			}
			if fl.dy, err = newCast(kernels.E5M2); err != nil {
				return err
			}
			shape := lin.W.Shape()
			out, in := shape[0], shape[1]
			fl.wq, fl.wtq = a.Tensor(kernels.E4M3, out, in), a.Tensor(kernels.E4M3, in, out)
			if f.wT[[2]int{in, out}] == nil {
				f.wT[[2]int{in, out}] = a.Tensor(t.dt, in, out)
			}
			if err := a.Err(); err != nil {
				return err
			}
			// The bias is added in float32 by the FP8 GEMM: the master's.
			bias := t.state.Masters.Get(layerParam(i, linearNames[j]) + ".bias")
			lin.Q = &layers.Quantized{W: fl.wq, Scale: fl.w.ScaleInv, B: bias, InCast: &x.Cast}
			row[j] = fl
		}
		f.lins = append(f.lins, row)
	}
	return nil
}

// of returns layer i's linear j, or nil when t has no FP8 state.
func (f *fp8Trainer) of(i, j int) *fp8Linear {
	if f == nil {
		return nil
	}
	return f.lins[i][j]
}

// begin starts a step: it sets every cast's scale from its history and
// casts each weight and its transpose.
func (f *fp8Trainer) begin() error {
	clear(f.xTqOf) // the inputs change every step
	for _, c := range f.casts {
		if s := c.meta.Scale(); s != c.uploaded {
			if err := kernels.UploadFloat32(c.Scale, []float32{s}); err != nil {
				return fmt.Errorf("fp8 scale: %w", err)
			}
			if err := kernels.UploadFloat32(c.ScaleInv, []float32{c.meta.ScaleInv()}); err != nil {
				return fmt.Errorf("fp8 scale: %w", err)
			}
			c.uploaded = s
		}
	}
	for i, row := range f.lins {
		for j, l := range row {
			shape := l.lin.W.Shape()
			wT := f.wT[[2]int{shape[1], shape[0]}]
			err := nn.RunSteps(
				func() error { return f.ops.CastFP8(l.wq, l.w.Amax, l.lin.W, l.w.Scale) },
				func() error { return transpose(f.t.be, wT, l.lin.W) },
				func() error { return f.ops.CastFP8(l.wtq, nil, wT, l.w.Scale) },
			)
			if err != nil {
				return fmt.Errorf("layer %d: FP8 weight %d: %w", i, j, err)
			}
		}
	}
	return nil
}

// end ends a step: it reads back every cast's amax and updates its
// scale.
func (f *fp8Trainer) end() error {
	for _, c := range f.casts {
		amax, err := kernels.ToFloat32(c.Amax)
		if err != nil {
			return fmt.Errorf("fp8 amax: %w", err)
		}
		c.meta.Record(amax[0])
		c.meta.Update()
	}
	return nil
}

// backward computes the gradients of l, out = x·Wᵀ + b, from dout in
// FP8: dx = dout·W, added to dx when accumulate (dx may be nil), and the
// weight's and bias's gradients g.
func (f *fp8Trainer) backward(l *fp8Linear, dx *kernels.Tensor, accumulate bool, g linear, dout, x *kernels.Tensor) error {
	be := f.t.be
	shape := l.lin.W.Shape()
	out, in := shape[0], shape[1]
	dyq, dyT, dyTq, xT, xTq := f.dyq[out], f.dyT[out], f.dyTq[out], f.xT[in], f.xTq[in]
	steps := []func() error{
		func() error { return f.ops.CastFP8(dyq, l.dy.Amax, dout, l.dy.Scale) },
		func() error { return transpose(be, dyT, dout) },
		func() error { return f.ops.CastFP8(dyTq, nil, dyT, l.dy.Scale) },
		func() error {
			if f.xTqOf[in] == (castInput{x, l.x}) {
				return nil
			}
			if err := transpose(be, xT, x); err != nil {
				return err
			}
			if err := f.ops.CastFP8(xTq, nil, xT, l.x.Scale); err != nil {
				return err
			}
			f.xTqOf[in] = castInput{x, l.x}
			return nil
		},
		func() error {
			return f.ops.FP8MatMul(g.W, dyTq, xTq, kernels.FP8MatMulParams{AScaleInv: l.dy.ScaleInv, BScaleInv: l.x.ScaleInv})
		},
		func() error { return be.SumRows(g.B, dout) },
	}
	if dx != nil {
		dst := dx
		if accumulate {
			dst = f.dx[in]
		}
		steps = append(steps, func() error {
			return f.ops.FP8MatMul(dst, dyq, l.wtq, kernels.FP8MatMulParams{AScaleInv: l.dy.ScaleInv, BScaleInv: l.w.ScaleInv})
		})
		if accumulate {
			steps = append(steps, func() error { return be.Add(dx, dx, dst) })
		}
	}
	return nn.RunSteps(steps...)
}

// close frees the FP8 state's tensors.
func (f *fp8Trainer) close() error { return f.bufs.Free() }

// transpose sets out [C, R] to x [R, C] transposed.
func transpose(be kernels.Backend, out, x *kernels.Tensor) error {
	s := x.Shape()
	x4, err := x.Reshape(1, s[0], s[1], 1)
	if err != nil {
		return err
	}
	out4, err := out.Reshape(1, s[1], s[0], 1)
	if err != nil {
		return err
	}
	return be.SwapAxes(out4, x4)
}
