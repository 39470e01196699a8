package resnet

import (
	"errors"
	"fmt"
	"slices"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

// Forward is one input geometry's pass: the activation buffers, planned
// once so that a buffer is reused as soon as its value is dead (a block
// without projection writes its output over its input, which is also the
// residual), and the list of ops that Run queues. The pass of a quantized
// model (see Model.Quantize) is the same plan with int8 convolutions.
type Forward struct {
	m        *Model
	N, H, W  int
	set      *nn.TensorSet
	pixels   *kernels.Tensor // F32 [N, 3, H·W, 1]: NCHW as given
	logits   *kernels.Tensor // [N, classes]
	steps    []step
	stageEnd [4]int             // steps through stage s+1
	stageOut [4]*kernels.Tensor // its output, NHWC
	// observe, when set (calibration), is called with the input of each
	// int8 site (see sites) before its layers read it.
	observe func(site string, x *kernels.Tensor) error
}

// planner hands out activation buffers by dtype and shape, reusing
// released ones.
type planner struct {
	a    *nn.Allocator
	free map[string][]*kernels.Tensor
}

func (p *planner) get(dt kernels.DType, shape ...int) *kernels.Tensor {
	key := fmt.Sprint(dt, shape)
	if l := p.free[key]; len(l) > 0 {
		p.free[key] = l[:len(l)-1]
		return l[len(l)-1]
	}
	return p.a.Tensor(dt, shape...)
}

func (p *planner) put(t *kernels.Tensor) {
	if t == nil {
		return
	}
	key := fmt.Sprint(t.DType(), []int(t.Shape()))
	p.free[key] = append(p.free[key], t)
}

// NewForward plans a pass over batch images of h×w pixels (each at least
// MinSize).
func (m *Model) NewForward(batch, h, w int) (*Forward, error) { return m.newForward(batch, h, w, nil) }

// newForward is NewForward with an observer of the int8 sites' inputs
// (nil for none).
func (m *Model) newForward(batch, h, w int, observe func(site string, x *kernels.Tensor) error) (*Forward, error) {
	if batch < 1 || h < MinSize || w < MinSize {
		return nil, fmt.Errorf("resnet: input [%d 3 %d %d]: want a batch of at least 1 and images of at least %d×%d",
			batch, h, w, MinSize, MinSize)
	}
	f := &Forward{m: m, N: batch, H: h, W: w, set: nn.NewTensorSet(m.be), observe: observe}
	if err := f.plan(); err != nil {
		return nil, errors.Join(err, f.set.Free())
	}
	return f, nil
}

func (f *Forward) plan() error {
	m, N := f.m, f.N
	dt := m.Options.Precision.DType()
	a := &nn.Allocator{Set: f.set}
	p := &planner{a: a, free: map[string][]*kernels.Tensor{}}
	f.pixels = a.Tensor(kernels.F32, N, 3, f.H*f.W, 1)
	nhwc := a.Tensor(kernels.F32, N, f.H*f.W, 3, 1)
	if err := a.Err(); err != nil {
		return err
	}
	f.do("pixels", "NCHW→NHWC", 0, func() error { return m.be.SwapAxes(nhwc, f.pixels) })
	x := a.View(nhwc, N, f.H, f.W, 3)
	stem := m.layers["conv1"]
	f.see("conv1", x)
	switch {
	case stem.q != nil:
		x = f.quantize(p, x, stem.q.InScale)
	case dt != kernels.F32:
		cast := p.get(dt, N, f.H, f.W, 3)
		in := x
		f.do("pixels", "cast", 0, func() error { return m.be.Cast(cast, in) })
		x = cast
	}
	// Stem: 7×7/2 convolution, BatchNorm, ReLU, 3×3/2 max pool.
	x = f.conv(p, x, stem, nil, kernels.ActReLU, nil)
	if err := a.Err(); err != nil {
		return err
	}
	sh := x.Shape()
	pooled := p.get(dt, N, poolOut(sh[1]), poolOut(sh[2]), sh[3])
	stemOut := x
	f.do("maxpool", fmt.Sprintf("3x3/2 %dx%dx%d", sh[3], sh[1], sh[2]), 0, func() error { return m.vis.MaxPool2D(pooled, stemOut, stemPool) })
	p.put(x)
	x = pooled
	for s, st := range m.Config.arch().stages {
		for _, b := range st {
			x = f.block(p, x, b)
		}
		f.stageEnd[s], f.stageOut[s] = len(f.steps), x
	}
	// Head: global average pool, fc.
	C := m.Config.Features()
	feat := a.Tensor(dt, N, C)
	f.logits = a.Tensor(dt, N, m.Config.NumClasses)
	if err := a.Err(); err != nil {
		return err
	}
	in := x
	f.do("avgpool", fmt.Sprintf("%dx%dx%d", C, x.Shape()[1], x.Shape()[2]), 0, func() error { return m.vis.GlobalAvgPool(feat, in) })
	f.see("fc", feat)
	fcShape := fmt.Sprintf("%d→%d", C, m.Config.NumClasses)
	fcFLOPs := 2 * float64(N*C) * float64(m.Config.NumClasses)
	if q := m.fcQ; q != nil {
		fq := f.quantize(p, feat, q.InScale)
		if err := a.Err(); err != nil {
			return err
		}
		f.do("fc", fcShape, fcFLOPs, func() error {
			return m.qo.QMatMul(f.logits, fq, q.W, kernels.QMatMulParams{AScale: q.InScale, BScale: q.Scale, Bias: q.B})
		})
		return a.Err()
	}
	f.do("fc", fcShape, fcFLOPs, func() error {
		return m.be.MatMul(f.logits, feat, m.fcW, kernels.MatMulParams{TransB: true, Bias: m.fcB, TF32: m.Options.TF32})
	})
	return a.Err()
}

// see plans the observation of x, the input of site, when the pass
// calibrates.
func (f *Forward) see(site string, x *kernels.Tensor) {
	if f.observe != nil && x != nil {
		f.do("observe", site, 0, func() error { return f.observe(site, x) })
	}
}

// quantize plans x's quantization with a static scale into a new int8
// buffer, which it returns. x stays live. One scale quantizes every value
// alike, so an image [N, H, W, C] is quantized as N·H rows of W·C values,
// not N·H·W rows of its channels (the stem's three).
func (f *Forward) quantize(p *planner, x, scale *kernels.Tensor) *kernels.Tensor {
	if x == nil {
		return nil
	}
	q := p.get(kernels.I8, x.Shape()...)
	if q == nil {
		return nil
	}
	xr, qr := x, q
	if s := x.Shape(); len(s) == 4 {
		xr, qr = p.a.View(x, s[0]*s[1], s[2]*s[3]), p.a.View(q, s[0]*s[1], s[2]*s[3])
	}
	qo := f.m.qo
	f.do("quantize", fmt.Sprint(x.Shape()), 0, func() error { return qo.Quantize(qr, scale, xr, false) })
	return q
}

// step is one op of a pass: what it computes (a layer's name, or the op's)
// and on what shape, its arithmetic (0 where FLOPs does not count it) and
// the op itself.
type step struct {
	name, shape string
	flops       float64
	op          func() error
}

// do appends an op to the pass.
func (f *Forward) do(name, shape string, flops float64, op func() error) {
	f.steps = append(f.steps, step{name: name, shape: shape, flops: flops, op: op})
}

// conv plans one convolution of x with its BatchNorm, the residual (may
// be nil) and act, into a new buffer, which it returns. x stays live. An
// int8 layer reads x in int8 and writes int8 requantized with the input
// scale of next, the layer its output feeds, when next is given (and
// int8), else the model's dtype.
func (f *Forward) conv(p *planner, x *kernels.Tensor, l *layer, residual *kernels.Tensor, act kernels.Activation, next *layer) *kernels.Tensor {
	if x == nil {
		return nil
	}
	if l.q != nil {
		return f.qconv(p, x, l, residual, act, next)
	}
	s, cv := x.Shape(), l.spec
	ho, wo := cv.out(s[1], s[2])
	dt := f.m.Options.Precision.DType()
	var out *kernels.Tensor
	if residual != nil {
		out = residual // the epilogue adds it in place
	} else {
		out = p.get(dt, s[0], ho, wo, cv.co)
	}
	if out == nil {
		return nil
	}
	vis, tf32 := f.m.vis, f.m.Options.TF32
	shape, flops := cv.describe(s[0], s[1], s[2])
	cp := kernels.ConvParams{Stride: [2]int{cv.stride, cv.stride}, Pad: [2]int{cv.pad, cv.pad}, Groups: cv.grp, TF32: tf32}
	if l.scale == nil { // folded: one convolution with the whole epilogue
		cp.Bias, cp.Residual, cp.Act = l.b, residual, act
		f.do(cv.conv, shape, flops, func() error { return vis.Conv2D(out, x, l.w, cp) })
		return out
	}
	raw := p.get(dt, s[0], ho, wo, cv.co)
	if raw == nil {
		return nil
	}
	f.do(cv.conv, shape, flops, func() error { return vis.Conv2D(raw, x, l.w, cp) })
	bn := kernels.ConvParams{Groups: cv.co, Bias: l.shift, Residual: residual, Act: act}
	f.do(cv.bn, fmt.Sprintf("%d %dx%d", cv.co, ho, wo), 0, func() error { return vis.Conv2D(out, raw, l.scale, bn) })
	p.put(raw)
	return out
}

// qconv is conv of an int8 layer: QConv2D of x (int8) into int8 for
// next, or into the model's dtype with the residual added in place.
func (f *Forward) qconv(p *planner, x *kernels.Tensor, l *layer, residual *kernels.Tensor, act kernels.Activation, next *layer) *kernels.Tensor {
	s, cv := x.Shape(), l.spec
	ho, wo := cv.out(s[1], s[2])
	cp := kernels.QConvParams{Stride: [2]int{cv.stride, cv.stride}, Pad: [2]int{cv.pad, cv.pad}, Groups: cv.grp,
		XScale: l.q.InScale, WScale: l.q.Scale, Bias: l.q.B, Residual: residual, Act: act}
	var out *kernels.Tensor
	switch {
	case residual != nil:
		out = residual // the epilogue adds it in place
	case next != nil && next.q != nil:
		out = p.get(kernels.I8, s[0], ho, wo, cv.co)
		cp.OutScale = next.q.InScale
	default:
		out = p.get(f.m.Options.Precision.DType(), s[0], ho, wo, cv.co)
	}
	if out == nil {
		return nil
	}
	qc := f.m.qc
	shape, flops := cv.describe(s[0], s[1], s[2])
	f.do(cv.conv, shape, flops, func() error { return qc.QConv2D(out, x, l.q.W, cp) })
	return out
}

// block plans one residual block over x and returns its output buffer:
// the projection's when the block has one, else x itself. In an int8
// model, x (the block's output before, in the model's dtype) is quantized
// once for the first convolution and the projection, the convolutions
// inside the block pass int8 on, and the last adds the float shortcut.
func (f *Forward) block(p *planner, x *kernels.Tensor, b block) *kernels.Tensor {
	m := f.m
	first := m.layers[b.convs[0].conv]
	f.see(b.convs[0].conv, x)
	in := x // what the first convolution and the projection read
	if first.q != nil {
		in = f.quantize(p, x, first.q.InScale)
	}
	t := in
	for i, cv := range b.convs[:len(b.convs)-1] {
		if i > 0 {
			f.see(cv.conv, t)
		}
		next := f.conv(p, t, m.layers[cv.conv], nil, kernels.ActReLU, m.layers[b.convs[i+1].conv])
		if t != in {
			p.put(t)
		}
		t = next
	}
	identity := x
	if b.down != nil {
		identity = f.conv(p, in, m.layers[b.down.conv], nil, kernels.ActNone, nil)
		p.put(x)
	}
	if in != x {
		p.put(in)
	}
	last := b.convs[len(b.convs)-1].conv
	f.see(last, t)
	out := f.conv(p, t, m.layers[last], identity, kernels.ActReLU, nil)
	p.put(t)
	return out
}

// SetPixels uploads the batch's images, NCHW float32 [N, 3, H, W]
// (normalised as the model was trained: see package imagenet).
func (f *Forward) SetPixels(vals []float32) error {
	if want := f.N * 3 * f.H * f.W; len(vals) != want {
		return fmt.Errorf("resnet: pixel_values has %d values, want [%d 3 %d %d] = %d", len(vals), f.N, f.H, f.W, want)
	}
	return kernels.UploadFloat32(f.pixels, vals)
}

// Run queues the whole pass.
func (f *Forward) Run() error { return f.run(len(f.steps)) }

func (f *Forward) run(n int) error {
	for i, st := range f.steps[:n] {
		if err := st.op(); err != nil {
			return f.opErr(i, err)
		}
	}
	return nil
}

// opErr is err of the pass's op i, naming it.
func (f *Forward) opErr(i int, err error) error {
	return fmt.Errorf("resnet: %s op %d of %d (%s): %w", f.m.Config.Name, i+1, len(f.steps), f.steps[i].name, err)
}

// Logits returns the last pass's logits [N, classes] as float32.
func (f *Forward) Logits() ([]float32, error) { return kernels.ToFloat32(f.logits) }

// Stage runs the pass through stage s (1…4, torchvision's layer1 …
// layer4) and returns that stage's output NCHW [N, C, h, w] as float32:
// the intermediate results the goldens hold.
func (f *Forward) Stage(s int) ([]float32, []int, error) {
	if s < 1 || s > 4 {
		return nil, nil, fmt.Errorf("resnet: stage %d, want 1 to 4", s)
	}
	if err := f.run(f.stageEnd[s-1]); err != nil {
		return nil, nil, err
	}
	out := f.stageOut[s-1]
	v, err := kernels.ToFloat32(out)
	if err != nil {
		return nil, nil, err
	}
	sh := out.Shape()
	n, h, w, c := sh[0], sh[1], sh[2], sh[3]
	nchw := make([]float32, len(v))
	for i := range n {
		for y := range h * w {
			for ch := range c {
				nchw[(i*c+ch)*h*w+y] = v[(i*h*w+y)*c+ch]
			}
		}
	}
	return nchw, []int{n, c, h, w}, nil
}

// Close frees the pass's buffers.
func (f *Forward) Close() error { return f.set.Free() }

// NewRunner returns a Forward for the shape of in's pixel_values, [N, 3,
// H, W]: the model as an nn.Runner.
func (m *Model) NewRunner(in map[string]nn.Values) (nn.Runner, error) {
	v, err := nn.Inputs(in, false, "pixel_values")
	if err != nil {
		return nil, fmt.Errorf("resnet: %w", err)
	}
	s := v[0].Shape
	if len(s) != 4 || s[1] != 3 {
		return nil, fmt.Errorf("resnet: pixel_values has shape %v, want [N, 3, H, W]: %w", s, kernels.ErrShape)
	}
	f, err := m.NewForward(s[0], s[2], s[3])
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Set sets pixel_values, of the Forward's shape [N, 3, H, W] (SetPixels).
func (f *Forward) Set(in map[string]nn.Values) error {
	v, err := nn.Inputs(in, false, "pixel_values")
	if err != nil {
		return fmt.Errorf("resnet: %w", err)
	}
	if want := []int{f.N, 3, f.H, f.W}; !slices.Equal(v[0].Shape, want) {
		return fmt.Errorf("resnet: pixel_values has shape %v, want %v: %w", v[0].Shape, want, kernels.ErrShape)
	}
	return f.SetPixels(v[0].F32)
}

// Outputs returns the last pass's logits [N, classes].
func (f *Forward) Outputs() ([]nn.Named, error) {
	logits, err := f.Logits()
	if err != nil {
		return nil, fmt.Errorf("resnet: logits: %w", err)
	}
	return []nn.Named{{Name: "logits", Values: nn.Values{Shape: []int{f.N, len(logits) / f.N}, F32: logits}}}, nil
}

// The model runs through the one run API.
var _ nn.Runnable = (*Model)(nil)
