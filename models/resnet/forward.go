package resnet

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

// Forward is one input geometry's pass: the activation buffers, planned
// once so that a buffer is reused as soon as its value is dead (a block
// without projection writes its output over its input, which is also the
// residual), and the list of ops that Run queues.
type Forward struct {
	m        *Model
	N, H, W  int
	set      *nn.TensorSet
	pixels   *kernels.Tensor // F32 [N, 3, H·W, 1]: NCHW as given
	logits   *kernels.Tensor // [N, classes]
	steps    []func() error
	stageEnd [4]int             // steps through stage s+1
	stageOut [4]*kernels.Tensor // its output, NHWC
}

// planner hands out activation buffers by shape, reusing released ones.
type planner struct {
	a    *nn.Allocator
	dt   kernels.DType
	free map[string][]*kernels.Tensor
}

func (p *planner) get(shape ...int) *kernels.Tensor {
	key := fmt.Sprint(shape)
	if l := p.free[key]; len(l) > 0 {
		p.free[key] = l[:len(l)-1]
		return l[len(l)-1]
	}
	return p.a.Tensor(p.dt, shape...)
}

func (p *planner) put(t *kernels.Tensor) {
	if t == nil {
		return
	}
	key := fmt.Sprint([]int(t.Shape()))
	p.free[key] = append(p.free[key], t)
}

// NewForward plans a pass over batch images of h×w pixels (each at least
// MinSize).
func (m *Model) NewForward(batch, h, w int) (*Forward, error) {
	if batch < 1 || h < MinSize || w < MinSize {
		return nil, fmt.Errorf("resnet: input [%d 3 %d %d]: want a batch of at least 1 and images of at least %d×%d",
			batch, h, w, MinSize, MinSize)
	}
	f := &Forward{m: m, N: batch, H: h, W: w, set: nn.NewTensorSet(m.be)}
	if err := f.plan(); err != nil {
		return nil, errors.Join(err, f.set.Free())
	}
	return f, nil
}

func (f *Forward) plan() error {
	m, N := f.m, f.N
	dt := m.Options.Precision.DType()
	a := &nn.Allocator{Set: f.set}
	p := &planner{a: a, dt: dt, free: map[string][]*kernels.Tensor{}}
	f.pixels = a.Tensor(kernels.F32, N, 3, f.H*f.W, 1)
	nhwc := a.Tensor(kernels.F32, N, f.H*f.W, 3, 1)
	if err := a.Err(); err != nil {
		return err
	}
	f.do(func() error { return m.be.SwapAxes(nhwc, f.pixels) })
	x := a.View(nhwc, N, f.H, f.W, 3)
	if dt != kernels.F32 {
		cast := p.get(N, f.H, f.W, 3)
		in := x
		f.do(func() error { return m.be.Cast(cast, in) })
		x = cast
	}
	// Stem: 7×7/2 convolution, BatchNorm, ReLU, 3×3/2 max pool.
	x = f.conv(p, x, m.layers["conv1"], nil, kernels.ActReLU)
	if err := a.Err(); err != nil {
		return err
	}
	sh := x.Shape()
	pooled := p.get(N, poolOut(sh[1]), poolOut(sh[2]), sh[3])
	stem := x
	f.do(func() error { return m.vis.MaxPool2D(pooled, stem, stemPool) })
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
	f.do(func() error { return m.vis.GlobalAvgPool(feat, in) })
	f.do(func() error {
		return m.be.MatMul(f.logits, feat, m.fcW, kernels.MatMulParams{TransB: true, Bias: m.fcB, TF32: m.Options.TF32})
	})
	return a.Err()
}

// do appends an op to the pass.
func (f *Forward) do(op func() error) { f.steps = append(f.steps, op) }

// conv plans one convolution of x with its BatchNorm, the residual (may
// be nil) and act, into a new buffer, which it returns. x stays live.
func (f *Forward) conv(p *planner, x *kernels.Tensor, l *layer, residual *kernels.Tensor, act kernels.Activation) *kernels.Tensor {
	if x == nil {
		return nil
	}
	s, cv := x.Shape(), l.spec
	ho, wo := cv.out(s[1], s[2])
	var out *kernels.Tensor
	if residual != nil {
		out = residual // the epilogue adds it in place
	} else {
		out = p.get(s[0], ho, wo, cv.co)
	}
	if out == nil {
		return nil
	}
	vis, tf32 := f.m.vis, f.m.Options.TF32
	cp := kernels.ConvParams{Stride: [2]int{cv.stride, cv.stride}, Pad: [2]int{cv.pad, cv.pad}, Groups: cv.grp, TF32: tf32}
	if l.scale == nil { // folded: one convolution with the whole epilogue
		cp.Bias, cp.Residual, cp.Act = l.b, residual, act
		f.do(func() error { return vis.Conv2D(out, x, l.w, cp) })
		return out
	}
	raw := p.get(s[0], ho, wo, cv.co)
	if raw == nil {
		return nil
	}
	f.do(func() error { return vis.Conv2D(raw, x, l.w, cp) })
	bn := kernels.ConvParams{Groups: cv.co, Bias: l.shift, Residual: residual, Act: act}
	f.do(func() error { return vis.Conv2D(out, raw, l.scale, bn) })
	p.put(raw)
	return out
}

// block plans one residual block over x and returns its output buffer:
// the projection's when the block has one, else x itself.
func (f *Forward) block(p *planner, x *kernels.Tensor, b block) *kernels.Tensor {
	m := f.m
	t := x
	for _, cv := range b.convs[:len(b.convs)-1] {
		next := f.conv(p, t, m.layers[cv.conv], nil, kernels.ActReLU)
		if t != x {
			p.put(t)
		}
		t = next
	}
	identity := x
	if b.down != nil {
		identity = f.conv(p, x, m.layers[b.down.conv], nil, kernels.ActNone)
		p.put(x)
	}
	out := f.conv(p, t, m.layers[b.convs[len(b.convs)-1].conv], identity, kernels.ActReLU)
	p.put(t)
	return out
}

// SetPixels uploads the batch's images, NCHW float32 [N, 3, H, W]
// (normalised as the model was trained: see package imagenet).
func (f *Forward) SetPixels(vals []float32) error {
	if want := f.N * 3 * f.H * f.W; len(vals) != want {
		return fmt.Errorf("resnet: pixel_values has %d values, want [%d 3 %d %d] = %d", len(vals), f.N, f.H, f.W, want)
	}
	buf := make([]byte, 4*len(vals))
	if err := kernels.EncodeFloat32(kernels.F32, buf, vals); err != nil {
		return err
	}
	return f.m.be.Upload(f.pixels, buf)
}

// Run queues the whole pass.
func (f *Forward) Run() error { return f.run(len(f.steps)) }

func (f *Forward) run(n int) error {
	for i, op := range f.steps[:n] {
		if err := op(); err != nil {
			return fmt.Errorf("resnet: %s op %d of %d: %w", f.m.Config.Name, i+1, len(f.steps), err)
		}
	}
	return nil
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
