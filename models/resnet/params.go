package resnet

import (
	"fmt"
	"math"
	"strings"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

// conv is one convolution and the BatchNorm after it, by their
// torchvision names.
type conv struct {
	conv, bn                    string // "layer1.0.conv1", "layer1.0.bn1"
	ci, co, k, stride, pad, grp int
}

// out is the convolution's output height and width for an h×w input.
func (cv conv) out(h, w int) (int, int) {
	return kernels.ConvOutSize(h, cv.k, cv.stride, cv.pad, 1), kernels.ConvOutSize(w, cv.k, cv.stride, cv.pad, 1)
}

// dims is the convolution's geometry on batch images of h×w.
func (cv conv) dims(batch, h, w int) kernels.ConvDims {
	p := kernels.ConvParams{Stride: [2]int{cv.stride, cv.stride}, Pad: [2]int{cv.pad, cv.pad}, Groups: cv.grp}
	return p.Dims(kernels.Shape{batch, h, w, cv.ci}, kernels.Shape{cv.co, cv.k, cv.k, cv.ci / cv.grp})
}

// flops is the convolution's work on batch images of h×w, two per
// multiply-add (kernels.ConvDims.FLOPs), and its output size.
func (cv conv) flops(batch, h, w int) (f float64, ho, wo int) {
	g := cv.dims(batch, h, w)
	return g.FLOPs(), g.Ho, g.Wo
}

// leastFLOPs is flops as its cheapest algorithm does it
// (kernels.ConvDims.LeastFLOPs), and the output size.
func (cv conv) leastFLOPs(batch, h, w int) (f float64, ho, wo int) {
	g := cv.dims(batch, h, w)
	return g.LeastFLOPs(), g.Ho, g.Wo
}

// describe is the convolution's geometry on batch images of h×w, as
// "k×k/stride ci→co h×w" (with "/g" groups when grouped), and its work as
// flops.
func (cv conv) describe(batch, h, w int) (string, float64) {
	f, _, _ := cv.flops(batch, h, w)
	s := fmt.Sprintf("%dx%d/%d %d→%d %dx%d", cv.k, cv.k, cv.stride, cv.ci, cv.co, h, w)
	if cv.grp > 1 {
		s += fmt.Sprintf(" g%d", cv.grp)
	}
	return s, f
}

// stemPool is the 3×3/2 max pool after the stem, padding 1.
var stemPool = kernels.PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Pad: [2]int{1, 1}}

// poolOut is one output dimension of stemPool.
func poolOut(in int) int { return kernels.ConvOutSize(in, 3, 2, 1, 1) }

// block is one residual block: its convolutions in order and the
// projection of its shortcut, if any (downsample.0 and downsample.1).
type block struct {
	convs []conv
	down  *conv
}

// arch is the whole network: the stem, four stages of blocks, and the
// classifier's input width.
type arch struct {
	stem   conv
	stages [4][]block
}

// arch lays the network out as torchvision's ResNet constructor does.
func (c Config) arch() arch {
	a := arch{stem: conv{conv: "conv1", bn: "bn1", ci: 3, co: 64, k: 7, stride: 2, pad: 3, grp: 1}}
	in, exp := 64, c.Block.Expansion()
	for s, n := range c.Layers {
		planes := 64 << s
		for i := range n {
			stride := 1
			if s > 0 && i == 0 {
				stride = 2
			}
			p := fmt.Sprintf("layer%d.%d.", s+1, i)
			cv := func(k string, ci, co, size, stride, grp int) conv {
				return conv{conv: p + "conv" + k, bn: p + "bn" + k, ci: ci, co: co, k: size, stride: stride, pad: size / 2, grp: grp}
			}
			var b block
			if c.Block == Basic {
				b.convs = []conv{cv("1", in, planes, 3, stride, 1), cv("2", planes, planes, 3, 1, 1)}
			} else {
				w := c.width(planes)
				b.convs = []conv{cv("1", in, w, 1, 1, 1), cv("2", w, w, 3, stride, c.Groups), cv("3", w, planes*exp, 1, 1, 1)}
			}
			if stride != 1 || in != planes*exp {
				b.down = &conv{conv: p + "downsample.0", bn: p + "downsample.1", ci: in, co: planes * exp, k: 1, stride: stride, grp: 1}
			}
			a.stages[s] = append(a.stages[s], b)
			in = planes * exp
		}
	}
	return a
}

// convs lists every convolution in torchvision's state_dict order.
func (a arch) convs() []conv {
	out := []conv{a.stem}
	for _, st := range a.stages {
		for _, b := range st {
			out = append(out, b.convs...)
			if b.down != nil {
				out = append(out, *b.down)
			}
		}
	}
	return out
}

// BatchNorm tensors of each convolution, after its ".".
var bnFields = []string{"weight", "bias", "running_mean", "running_var"}

// Params lists the model's float parameters in torchvision's state_dict
// order (each BatchNorm's num_batches_tracked, an integer counter that
// inference does not read, is left out): convolution weights [Co, Ci/G,
// Kh, Kw], BatchNorm's weight, bias, running_mean and running_var [C], and
// fc.weight [classes, features] and fc.bias.
func (c Config) Params() []nn.Param {
	var ps []nn.Param
	for _, cv := range c.arch().convs() {
		ps = append(ps, nn.Param{Name: cv.conv + ".weight", Shape: []int{cv.co, cv.ci / cv.grp, cv.k, cv.k}})
		for _, f := range bnFields {
			ps = append(ps, nn.Param{Name: cv.bn + "." + f, Shape: []int{cv.co}})
		}
	}
	return append(ps,
		nn.Param{Name: "fc.weight", Shape: []int{c.NumClasses, c.Features()}},
		nn.Param{Name: "fc.bias", Shape: []int{c.NumClasses}})
}

// CountParams is the number of parameter values (BatchNorm's running
// statistics included, as torchvision's state_dict counts them).
func (c Config) CountParams() int64 {
	var n int64
	for _, p := range c.Params() {
		n += int64(p.Len())
	}
	return n
}

// SyntheticRange returns the center and half-width of a parameter's
// synthetic values in a model whose classifier reads features channels
// (testdata/reference/resnet.py's definition): convolution weights
// ±√(6/fan-in) (He uniform, fan-in Ci/G·Kh·Kw); running_var 2 ± 1 and
// running_mean 0.1 ± 0.2, so that folding the statistics is really
// exercised; BatchNorm weight 1 ± 0.25 and bias ±0.1; fc.weight and
// fc.bias ±1/√features.
func SyntheticRange(p nn.Param, features int) (center, half float64) {
	n := p.Name
	switch {
	case len(p.Shape) == 4:
		return 0, math.Sqrt(6 / float64(p.Shape[1]*p.Shape[2]*p.Shape[3]))
	case strings.HasSuffix(n, ".running_var"):
		return 2, 1
	case strings.HasSuffix(n, ".running_mean"):
		return 0.1, 0.2
	case strings.HasPrefix(n, "fc."):
		return 0, 1 / math.Sqrt(float64(features))
	case strings.HasSuffix(n, ".weight"):
		return 1, 0.25
	}
	return 0, 0.1
}

// Synthetic returns seeded synthetic weights of cfg, identical to
// testdata/reference/resnet.py's: each tensor from the stream of its
// torchvision name (package synth), in the ranges of SyntheticRange.
func Synthetic(cfg Config, seed uint64) nn.Source {
	features := cfg.Features()
	return nn.SyntheticShaped(seed, func(p nn.Param) (float64, float64) { return SyntheticRange(p, features) })
}

// names maps parameters to checkpoint tensors: torchvision's names as
// they are; BatchNorm's num_batches_tracked counters (I64) are read by
// nothing and may stay unread.
var names = nn.Names{
	Model: "resnet",
	Ignored: func(name string) bool {
		return strings.HasSuffix(name, ".num_batches_tracked")
	},
}

// OpenCheckpoint opens a torchvision state_dict saved as safetensors.
func OpenCheckpoint(paths ...string) (*nn.Checkpoint, error) { return nn.OpenCheckpoint(paths, names) }

// FromCheckpoint returns the named member of the family with the number
// of classes of the checkpoint's fc.weight (1000 for ImageNet, 10 for a
// CIFAR-10 head), float or, in a quantized checkpoint, int8 of the same
// shape; Load then finds any tensor of another depth or width missing or
// unused.
func FromCheckpoint(name string, ck *nn.Checkpoint) (Config, error) {
	cfg, err := ByName(name)
	if err != nil {
		return Config{}, err
	}
	shape, err := ck.Shape("fc.weight")
	if err != nil {
		return Config{}, err
	}
	if len(shape) != 2 || shape[0] < 1 || shape[1] != cfg.Features() {
		return Config{}, fmt.Errorf("resnet: %v: fc.weight has shape %v, want [classes %d] for %s: %w",
			ck, shape, cfg.Features(), name, nn.ErrWeights)
	}
	cfg.NumClasses = shape[0]
	return cfg, nil
}
