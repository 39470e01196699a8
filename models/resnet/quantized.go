package resnet

import (
	"fmt"
	"math"
	"slices"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

// Quantized checkpoints: a W8A8 static model (see Model.Quantize) in the
// compressed-tensors layout, under torchvision's module names. Every
// convolution X (conv1, layer1.0.conv1, …, layer1.0.downsample.0) is
// stored as X.weight (I8 [Co, Ci/G, Kh, Kw], torchvision's layout),
// X.weight_scale (F32 [Co, 1]: per output channel), X.input_scale (F32
// [1]: static, per tensor) and X.bias (F32 [Co]: its BatchNorm folded in,
// so no bn* or downsample.1 tensors), and the classifier the same way:
// fc.weight (I8 [classes, features]), fc.weight_scale [classes, 1],
// fc.input_scale [1] and fc.bias [classes]. A projection reads its block's
// input, quantized once, with the block's first convolution: both store
// that one scale. Scales and biases may be stored in any float dtype;
// they are held in float32. Model.QuantizedTensors writes such a
// checkpoint, Load reads one (IsQuantized tells them apart from float
// state_dicts), and its config.json, where one is written, carries
// quant.NewConfig(QuantSpec(method)) as its quantization_config.

// QuantSpec is the recipe of a quantized ResNet, its quantization_config
// as quant.NewConfig writes it: W8A8 with static input scales calibrated
// by method (the observer's name), every Conv2d and Linear module
// quantized, none ignored.
func QuantSpec(method string) quant.Spec {
	return quant.Spec{Scheme: quant.W8A8, Method: method, Targets: quant.ConvTargets()}
}

// CheckQuantSpec checks that a quantization_config (as quant.ParseConfig
// reads it) describes what Load runs: W8A8 with static input scales,
// targets Conv2d and Linear, nothing ignored.
func CheckQuantSpec(s quant.Spec) error {
	switch {
	case s.Scheme != quant.W8A8:
		return fmt.Errorf("resnet: quantization_config is %s; a ResNet runs w8a8 with static input scales: %w", s.Scheme, kernels.ErrUnsupported)
	case s.Dynamic:
		return fmt.Errorf("resnet: quantization_config is w8a8 with dynamic input scales; a ResNet runs static input scales: %w", kernels.ErrUnsupported)
	case !slices.Equal(s.Targets, quant.ConvTargets()):
		targets := s.Targets
		if len(targets) == 0 {
			targets = []string{"Linear"}
		}
		return fmt.Errorf("resnet: quantization_config targets %q; a ResNet quantizes every Conv2d and Linear module (targets %q): %w",
			targets, quant.ConvTargets(), kernels.ErrUnsupported)
	case len(s.Ignore) > 0:
		return fmt.Errorf("resnet: quantization_config ignores %q; a ResNet quantizes every convolution and fc, leaving none in floating point: %w",
			s.Ignore, kernels.ErrUnsupported)
	}
	return nil
}

// IsQuantized reports whether ck holds a quantized ResNet (conv1.weight
// stored as I8, or a conv1.weight_scale), which Load reads as int8.
func IsQuantized(ck *nn.Checkpoint) bool {
	if dt, err := ck.DType("conv1.weight"); err == nil && dt == "I8" {
		return true
	}
	_, err := ck.Shape("conv1.weight_scale")
	return err == nil
}

// loadQuantized reads a quantized checkpoint into m (see above).
func (m *Model) loadQuantized(ck *nn.Checkpoint) error {
	if m.Options.Unfolded {
		return fmt.Errorf("resnet: %v is int8 with BatchNorm folded into its convolutions; Options.Unfolded has no BatchNorm to keep apart: %w",
			ck, kernels.ErrUnsupported)
	}
	qo, err := kernels.Group[kernels.Quant](m.be)
	if err != nil {
		return fmt.Errorf("resnet: %v is int8: %w", ck, err)
	}
	qc, err := kernels.Group[kernels.QuantConv](m.be)
	if err != nil {
		return fmt.Errorf("resnet: %v is int8: %w", ck, err)
	}
	m.qo, m.qc = qo, qc
	a := m.Config.arch()
	sites := a.sites()
	// Each site's input scale, uploaded once (state_dict order has a
	// block's first convolution before its projection).
	scales := map[string]*kernels.Tensor{}
	for _, cv := range a.convs() {
		cg, kk := cv.ci/cv.grp, cv.k*cv.k
		w, err := ck.Tensor(nn.Param{Name: cv.conv + ".weight", Shape: []int{cv.co, cg, cv.k, cv.k}}, "I8")
		if err != nil {
			return err
		}
		// [Co, Ci/G, Kh, Kw] → [Co, Kh, Kw, Ci/G].
		ohwi := make([]byte, len(w.Data))
		for o := range cv.co {
			for c := range cg {
				for k := range kk {
					ohwi[(o*kk+k)*cg+c] = w.Data[(o*cg+c)*kk+k]
				}
			}
		}
		q, err := m.loadQLayer(ck, cv.conv, sites[cv.conv], scales, ohwi, cv.co, cv.k, cv.k, cg)
		if err != nil {
			return err
		}
		m.layers[cv.conv] = &layer{spec: cv, q: q}
	}
	F, K := m.Config.Features(), m.Config.NumClasses
	w, err := ck.Tensor(nn.Param{Name: "fc.weight", Shape: []int{K, F}}, "I8")
	if err != nil {
		return err
	}
	if m.fcQ, err = m.loadQLayer(ck, "fc", "fc", scales, w.Data, K, F); err != nil {
		return err
	}
	return ck.CheckUnused()
}

// loadQLayer uploads layer n's int8 weight (its bytes w in the device
// layout shape, shape[0] the output channels), and reads its weight_scale,
// bias and input_scale. The input scale is its site's: uploaded for the
// site's first layer (into scales), and for the other (a projection)
// required equal to it.
func (m *Model) loadQLayer(ck *nn.Checkpoint, n, site string, scales map[string]*kernels.Tensor, w []byte, shape ...int) (*qlayer, error) {
	co := shape[0]
	q := &qlayer{}
	var err error
	if q.W, err = m.params.UploadBytes(n+".weight", kernels.I8, w, shape...); err != nil {
		return nil, fmt.Errorf("resnet: %w", err)
	}
	values := func(suffix string, scale bool, shape ...int) ([]float32, error) {
		v, err := ck.Values(nn.Param{Name: n + suffix, Shape: shape})
		if err != nil {
			return nil, err
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || scale && x <= 0 {
				want := "a finite bias"
				if scale {
					want = "a finite positive scale"
				}
				return nil, fmt.Errorf("resnet: %v: %s%s[%d] = %v, want %s: %w", ck, n, suffix, i, x, want, nn.ErrWeights)
			}
		}
		return v, nil
	}
	ws, err := values(".weight_scale", true, co, 1)
	if err != nil {
		return nil, err
	}
	if q.Scale, err = m.params.Upload(n+".weight_scale", kernels.F32, ws, co); err != nil {
		return nil, fmt.Errorf("resnet: %w", err)
	}
	b, err := values(".bias", false, co)
	if err != nil {
		return nil, err
	}
	if q.B, err = m.params.Upload(n+".bias", kernels.F32, b, co); err != nil {
		return nil, fmt.Errorf("resnet: %w", err)
	}
	in, err := values(".input_scale", true, 1)
	if err != nil {
		return nil, err
	}
	if q.InScale = scales[site]; q.InScale == nil {
		if site != n {
			return nil, fmt.Errorf("resnet: %s reads the input of %s, which is not loaded: %w", n, site, kernels.ErrValue) // arch order
		}
		if q.InScale, err = m.params.Upload(site+".input_scale", kernels.F32, in, 1); err != nil {
			return nil, fmt.Errorf("resnet: %w", err)
		}
		scales[site] = q.InScale
		return q, nil
	}
	siteScale, err := kernels.ToFloat32(q.InScale)
	if err != nil {
		return nil, fmt.Errorf("resnet: %s.input_scale: %w", site, err)
	}
	if in[0] != siteScale[0] {
		return nil, fmt.Errorf("resnet: %v: %s.input_scale = %v and %s.input_scale = %v: the projection reads its block's input with the block's first convolution, quantized once, and needs its scale: %w",
			ck, n, in[0], site, siteScale[0], nn.ErrWeights)
	}
	return q, nil
}

// QuantizedTensors returns the tensors of a quantized model's checkpoint
// in the compressed-tensors layout (see above), in torchvision's
// state_dict order, fc last. Its config.json's quantization_config, where
// one is written, is quant.NewConfig(QuantSpec(method)). The activations'
// dtype (Options.Precision) is not in the tensors: a model loaded from
// them runs exactly as this one under the same Options.
func (m *Model) QuantizedTensors() ([]safetensors.Tensor, error) {
	if !m.Quantized() {
		return nil, fmt.Errorf("resnet: %s is not quantized: %w", m.Config.Name, kernels.ErrValue)
	}
	var out []safetensors.Tensor
	download := func(name string, t *kernels.Tensor, want kernels.DType) ([]byte, error) {
		if t == nil || t.DType() != want {
			return nil, fmt.Errorf("resnet: %s: no %v tensor on the device: %w", name, want, kernels.ErrValue)
		}
		buf := make([]byte, t.Bytes())
		if err := m.be.Download(buf, t); err != nil {
			return nil, fmt.Errorf("resnet: %s: %w", name, err)
		}
		return buf, nil
	}
	add := func(n string, q *qlayer, w []byte, wShape []int) error {
		out = append(out, safetensors.Tensor{Name: n + ".weight", DType: "I8", Shape: wShape, Data: w})
		co := wShape[0]
		for _, t := range []struct {
			suffix string
			t      *kernels.Tensor
			shape  []int
		}{{".weight_scale", q.Scale, []int{co, 1}}, {".input_scale", q.InScale, []int{1}}, {".bias", q.B, []int{co}}} {
			data, err := download(n+t.suffix, t.t, kernels.F32)
			if err != nil {
				return err
			}
			if len(data) != 4*kernels.Shape(t.shape).Len() {
				return fmt.Errorf("resnet: %s%s has shape %v on the device, want %v: %w", n, t.suffix, t.t.Shape(), t.shape, kernels.ErrShape)
			}
			out = append(out, safetensors.Tensor{Name: n + t.suffix, DType: "F32", Shape: t.shape, Data: data})
		}
		return nil
	}
	for _, cv := range m.Config.arch().convs() {
		l := m.layers[cv.conv]
		if l == nil || l.q == nil {
			return nil, fmt.Errorf("resnet: %s is not quantized: %w", cv.conv, kernels.ErrValue)
		}
		ohwi, err := download(cv.conv+".weight", l.q.W, kernels.I8)
		if err != nil {
			return nil, err
		}
		cg, kk := cv.ci/cv.grp, cv.k*cv.k
		if len(ohwi) != cv.co*kk*cg {
			return nil, fmt.Errorf("resnet: %s.weight has shape %v on the device, want [%d %d %d %d]: %w",
				cv.conv, l.q.W.Shape(), cv.co, cv.k, cv.k, cg, kernels.ErrShape)
		}
		// [Co, Kh, Kw, Ci/G] → [Co, Ci/G, Kh, Kw].
		oihw := make([]byte, len(ohwi))
		for o := range cv.co {
			for c := range cg {
				for k := range kk {
					oihw[(o*cg+c)*kk+k] = ohwi[(o*kk+k)*cg+c]
				}
			}
		}
		if err := add(cv.conv, l.q, oihw, []int{cv.co, cg, cv.k, cv.k}); err != nil {
			return nil, err
		}
	}
	F, K := m.Config.Features(), m.Config.NumClasses
	w, err := download("fc.weight", m.fcQ.W, kernels.I8)
	if err != nil {
		return nil, err
	}
	if len(w) != K*F {
		return nil, fmt.Errorf("resnet: fc.weight has shape %v on the device, want [%d %d]: %w", m.fcQ.W.Shape(), K, F, kernels.ErrShape)
	}
	if err := add("fc", m.fcQ, w, []int{K, F}); err != nil {
		return nil, err
	}
	return out, nil
}
