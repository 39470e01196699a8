package bench_test

import (
	"fmt"
	"testing"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/kerneltest"
	"github.com/zbench/zbench/zbench"
)

// convLayer is one convolution of ResNet-50 at 224×224: its input
// [H, W, Ci], filter [Co, K, K, Ci], stride and padding.
type convLayer struct {
	name                       string
	h, w, ci, co, k, stride, p int
	residual                   bool // the bottleneck's last 1×1, adding the shortcut
}

// resnetConvLayers are the kinds of convolution ResNet-50 spends its time
// in: the 7×7 stem, the 3×3 of each stage (stride 2 where a stage starts),
// the 1×1 expansions and reductions, and a strided 1×1 projection.
var resnetConvLayers = []convLayer{
	{name: "stem-7x7s2", h: 224, w: 224, ci: 3, co: 64, k: 7, stride: 2, p: 3},
	{name: "layer1-3x3", h: 56, w: 56, ci: 64, co: 64, k: 3, stride: 1, p: 1},
	{name: "layer1-1x1-expand", h: 56, w: 56, ci: 64, co: 256, k: 1, stride: 1, residual: true},
	{name: "layer2-3x3s2", h: 56, w: 56, ci: 128, co: 128, k: 3, stride: 2, p: 1},
	{name: "layer2-1x1s2-down", h: 56, w: 56, ci: 256, co: 512, k: 1, stride: 2},
	{name: "layer3-3x3", h: 14, w: 14, ci: 256, co: 256, k: 3, stride: 1, p: 1},
	{name: "layer4-1x1-reduce", h: 7, w: 7, ci: 2048, co: 512, k: 1, stride: 1},
}

// convBatch is the batch of the conv2d points: 32 on GPUs, 1 on CPUs.
func convBatch(dev kernels.Backend) int {
	if dev.Info().Kind == kernels.GPU {
		return 32
	}
	return 1
}

// benchConvLayers runs BenchmarkKernels' conv2d points: each layer with
// BatchNorm folded (bias), ReLU (and the residual where the model adds
// it) in the epilogue, as models/resnet runs it. -short keeps the 3×3 of
// layer 1 in f32.
func benchConvLayers(b *testing.B) {
	layers := resnetConvLayers
	if testing.Short() {
		layers = layers[1:2]
	}
	for _, l := range layers {
		for _, dev := range visionDevices() {
			for _, dt := range dtypes(kernels.F32, kernels.F16, kernels.BF16) {
				if dt != kernels.F32 && dev.Info().Kind != kernels.GPU {
					continue // 16-bit on CPUs computes in f32 with conversions: nothing to learn
				}
				n := convBatch(dev)
				for _, cache := range cacheModes(dev) {
					b.Run(fmt.Sprintf("op=conv2d/dev=%s/dtype=%v/layer=%s/batch=%d%s", dev.Name(), dt, l.name, n, cache), func(b *testing.B) {
						run, work, verify := convSetup(b, dev, dt, l, n)
						zbench.Measure(b, zbench.Bench{Dev: dev, Work: work, Op: run, Verify: verify,
							MaxRelErr: kernels.Tolerance(dt), Cold: cache == "/cache=cold"})
					})
				}
			}
		}
	}
}

// convSetup allocates one layer's operands, the filters packed where the
// backend packs them (as models/resnet packs them when it loads); the
// check compares the first image of the batch with the float64 reference.
func convSetup(b *testing.B, dev kernels.Backend, dt kernels.DType, l convLayer, n int) (func() error, zbench.Workload, func() (float64, error)) {
	vis, err := kernels.Group[kernels.Vision](dev)
	if err != nil {
		b.Skip(err)
	}
	p := kernels.ConvParams{Stride: [2]int{l.stride, l.stride}, Pad: [2]int{l.p, l.p}, Act: kernels.ActReLU}
	g := p.Dims(kernels.Shape{n, l.h, l.w, l.ci}, kernels.Shape{l.co, l.k, l.k, l.ci})
	xv := uniform(21, dt, n*l.h*l.w*l.ci)
	wv := uniform(22, dt, l.co*l.k*l.k*l.ci)
	bv := uniform(23, dt, l.co)
	x := upload(b, dev, dt, xv, n, l.h, l.w, l.ci)
	w := upload(b, dev, dt, wv, l.co, l.k, l.k, l.ci)
	if cp, err := kernels.Group[kernels.ConvPacker](dev); err == nil {
		if err := cp.PackConvFilters(w, 1); err != nil {
			b.Fatal(err)
		}
	}
	p.Bias = upload(b, dev, dt, bv, l.co)
	outLen := n * g.Ho * g.Wo * l.co
	var rv []float32
	if l.residual {
		rv = uniform(24, dt, outLen)
		p.Residual = upload(b, dev, dt, rv, n, g.Ho, g.Wo, l.co)
	}
	out := alloc(b, dev, dt, n, g.Ho, g.Wo, l.co)
	bytes := float64(len(xv)+len(wv)+l.co+outLen) * float64(dt.Size())
	if l.residual {
		bytes += float64(outLen * dt.Size())
	}
	work := zbench.Workload{FLOPs: g.FLOPs(), LeastFLOPs: g.LeastFLOPs(), Bytes: bytes, DType: dt}
	verify := func() (float64, error) {
		one := g
		one.N = 1
		want := kerneltest.RefConv2D(widen(xv[:l.h*l.w*l.ci]), widen(wv), one)
		for i := range want {
			v := want[i] + float64(bv[i%l.co])
			if rv != nil {
				v += float64(rv[i])
			}
			want[i] = max(v, 0)
		}
		got, err := kernels.ToFloat32(out)
		if err != nil {
			return 0, err
		}
		rel, _ := kernels.RelErr(widen(got[:len(want)]), want)
		return rel, nil
	}
	return func() error { return vis.Conv2D(out, x, w, p) }, work, verify
}
