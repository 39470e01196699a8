package resnet

import (
	"errors"
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

// BNEps is BatchNorm's epsilon in torchvision's ResNets.
const BNEps = 1e-5

// Options choose how a model runs.
type Options struct {
	// Precision is the dtype of weights and activations: F32, F16 or
	// BF16 (0 means F32). Arithmetic is in float32 either way.
	Precision nn.Precision
	// TF32 lets F32 convolutions and the classifier run on TF32 tensor
	// cores where the device has them (dtype=tf32 in benchmarks).
	TF32 bool
	// Unfolded keeps each BatchNorm as its own op (a per-channel scale
	// and shift after a convolution without bias) instead of folding it
	// into the convolution's weights and bias: the check that folding
	// changes nothing but rounding.
	Unfolded bool
}

// layer is one convolution on the device: weights [Co, Kh, Kw, Ci/G]
// with the folded BatchNorm's bias [Co], or, unfolded, the raw weights
// and the BatchNorm as a 1×1 depthwise scale [C, 1, 1, 1] and shift [C];
// or, once the model is quantized, only its int8 form q.
type layer struct {
	spec         conv
	w, b         *kernels.Tensor
	scale, shift *kernels.Tensor
	q            *qlayer
}

// Model is a loaded network on a device.
type Model struct {
	Config  Config
	Options Options
	be      kernels.Backend
	vis     kernels.Vision
	params  *nn.TensorSet
	layers  map[string]*layer // by convolution name
	fcW     *kernels.Tensor   // [classes, features]
	fcB     *kernels.Tensor
	// The int8 ops and classifier of a quantized model (see Quantize).
	qo  kernels.Quant
	qc  kernels.QuantConv
	fcQ *qlayer
}

// Load reads cfg's parameters from src (a checkpoint, or Synthetic) and
// uploads them to be: convolution weights moved to [Co, Kh, Kw, Ci/G] and,
// unless opts.Unfolded, BatchNorm folded into them in float64
// (w·γ/√(var+ε), β − mean·γ/√(var+ε)) before the one rounding to the
// model's dtype, then packed for be's Conv2D where be is a
// kernels.ConvPacker. A checkpoint tensor that no parameter reads (but
// num_batches_tracked) is an error, as is a statistic that makes the
// BatchNorm undefined.
//
// A quantized checkpoint (IsQuantized; see Model.QuantizedTensors) loads
// as the quantized model it was written from: int8 weights with their
// scales and float32 biases, activations in opts.Precision (under the
// Options it was quantized with, its logits are bit for bit that model's).
// It needs a backend with kernels.Quant and kernels.QuantConv, and not
// opts.Unfolded.
func Load(be kernels.Backend, cfg Config, src nn.Source, opts Options) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Precision == 0 {
		opts.Precision = nn.F32
	}
	switch opts.Precision {
	case nn.F32, nn.F16, nn.BF16:
	default:
		return nil, fmt.Errorf("resnet: precision %v: want f32, f16 or bf16", opts.Precision)
	}
	vis, err := kernels.Group[kernels.Vision](be)
	if err != nil {
		return nil, fmt.Errorf("resnet: %w", err)
	}
	m := &Model{Config: cfg, Options: opts, be: be, vis: vis, params: nn.NewTensorSet(be), layers: map[string]*layer{}}
	if ck, ok := src.(*nn.Checkpoint); ok && IsQuantized(ck) {
		err = m.loadQuantized(ck)
	} else {
		err = m.load(src)
	}
	if err != nil {
		return nil, errors.Join(err, m.params.Free())
	}
	return m, nil
}

func (m *Model) load(src nn.Source) error {
	dt := m.Options.Precision.DType()
	for _, cv := range m.Config.arch().convs() {
		l, err := m.loadConv(src, cv, dt)
		if err != nil {
			return err
		}
		m.layers[cv.conv] = l
	}
	F, K := m.Config.Features(), m.Config.NumClasses
	w, err := src.Values(nn.Param{Name: "fc.weight", Shape: []int{K, F}})
	if err != nil {
		return err
	}
	b, err := src.Values(nn.Param{Name: "fc.bias", Shape: []int{K}})
	if err != nil {
		return err
	}
	if m.fcW, err = m.params.Upload("fc.weight", dt, w, K, F); err != nil {
		return err
	}
	if m.fcB, err = m.params.Upload("fc.bias", dt, b, K); err != nil {
		return err
	}
	if c, ok := src.(*nn.Checkpoint); ok {
		return c.CheckUnused()
	}
	return nil
}

// loadConv reads one convolution and its BatchNorm and uploads them,
// folded or not.
func (m *Model) loadConv(src nn.Source, cv conv, dt kernels.DType) (*layer, error) {
	cg := cv.ci / cv.grp
	w, err := src.Values(nn.Param{Name: cv.conv + ".weight", Shape: []int{cv.co, cg, cv.k, cv.k}})
	if err != nil {
		return nil, err
	}
	var bn [4][]float32
	for i, f := range bnFields {
		if bn[i], err = src.Values(nn.Param{Name: cv.bn + "." + f, Shape: []int{cv.co}}); err != nil {
			return nil, err
		}
	}
	gamma, beta, mean, variance := bn[0], bn[1], bn[2], bn[3]
	scale, shift := make([]float64, cv.co), make([]float64, cv.co)
	for o := range cv.co {
		v := float64(variance[o])
		if !(v+BNEps > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("resnet: %s.running_var[%d] = %v: BatchNorm needs a finite variance above −ε: %w", cv.bn, o, v, nn.ErrWeights)
		}
		scale[o] = float64(gamma[o]) / math.Sqrt(v+BNEps)
		shift[o] = float64(beta[o]) - float64(mean[o])*scale[o]
		if math.IsNaN(shift[o]) || math.IsInf(shift[o], 0) || math.IsNaN(scale[o]) || math.IsInf(scale[o], 0) {
			return nil, fmt.Errorf("resnet: %s: channel %d's weight, bias or running_mean is not finite: %w", cv.bn, o, nn.ErrWeights)
		}
	}
	fold := !m.Options.Unfolded
	// [Co, Ci/G, Kh, Kw] → [Co, Kh, Kw, Ci/G], scaled by the channel's
	// BatchNorm when folding.
	kk := cv.k * cv.k
	ohwi := make([]float32, len(w))
	for o := range cv.co {
		s := 1.0
		if fold {
			s = scale[o]
		}
		for c := range cg {
			for k := range kk {
				v := w[(o*cg+c)*kk+k]
				if v != v || math.IsInf(float64(v), 0) {
					return nil, fmt.Errorf("resnet: %s.weight holds %v: %w", cv.conv, v, nn.ErrWeights)
				}
				ohwi[(o*kk+k)*cg+c] = float32(float64(v) * s)
			}
		}
	}
	l := &layer{spec: cv}
	if l.w, err = m.params.Upload(cv.conv+".weight", dt, ohwi, cv.co, cv.k, cv.k, cg); err != nil {
		return nil, err
	}
	if packer, err := kernels.Group[kernels.ConvPacker](m.be); err == nil {
		if err := packer.PackConvFilters(l.w, cv.grp); err != nil {
			return nil, fmt.Errorf("resnet: %s.weight: %w", cv.conv, err)
		}
	}
	if fold {
		l.b, err = m.params.Upload(cv.bn+".folded_bias", dt, narrow(shift), cv.co)
		return l, err
	}
	if l.scale, err = m.params.Upload(cv.bn+".scale", dt, narrow(scale), cv.co, 1, 1, 1); err != nil {
		return nil, err
	}
	l.shift, err = m.params.Upload(cv.bn+".shift", dt, narrow(shift), cv.co)
	return l, err
}

// narrow rounds float64 values to float32.
func narrow(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// Backend is the device the model is on.
func (m *Model) Backend() kernels.Backend { return m.be }

// Close frees the model's weights.
func (m *Model) Close() error { return m.params.Free() }

// WeightBytes is the size of the weights on the device: in the model's
// dtype, or once quantized the int8 weights with their scales and float32
// biases.
func (m *Model) WeightBytes() int64 { return m.params.Bytes() }

// FLOPs is the arithmetic of one forward pass over batch images of
// h×w: two per multiply-add of every convolution and of the classifier
// (pooling, BatchNorm, additions and ReLU, all O(activations), are not
// counted, as is the custom).
func (c Config) FLOPs(batch, h, w int) float64 { return c.flops(batch, h, w, conv.flops) }

// LeastFLOPs is FLOPs with each convolution's arithmetic as its cheapest
// algorithm does it (kernels.ConvDims.LeastFLOPs): what the roofline
// guard holds to the peak.
func (c Config) LeastFLOPs(batch, h, w int) float64 { return c.flops(batch, h, w, conv.leastFLOPs) }

// flops sums the arithmetic of one forward pass, each convolution's as
// of counts it.
func (c Config) flops(batch, h, w int, of func(cv conv, batch, h, w int) (float64, int, int)) float64 {
	a := c.arch()
	f, h, w := of(a.stem, batch, h, w)
	h, w = poolOut(h), poolOut(w)
	for _, st := range a.stages {
		for _, b := range st {
			bh, bw := h, w
			for _, cv := range b.convs {
				var cf float64
				cf, bh, bw = of(cv, batch, bh, bw)
				f += cf
			}
			if b.down != nil {
				df, _, _ := of(*b.down, batch, h, w)
				f += df
			}
			h, w = bh, bw
		}
	}
	return f + 2*float64(batch)*float64(c.Features())*float64(c.NumClasses)
}
