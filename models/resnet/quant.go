package resnet

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/quant"
)

// INT8 post-training quantization of a ResNet: W8A8 static. Every
// convolution (the stem's included) and the classifier keep their weights
// in int8 with one scale per output channel, taken after BatchNorm is
// folded into the convolutions, and quantize their inputs with one scale
// per tensor fixed by calibration; the products run in int8 with exact
// int32 sums (kernels.QuantConv, and kernels.Quant's QMatMul for fc),
// rescaled and biased in float32. Inside a residual block the first
// convolutions pass their output on in int8, requantized in their
// epilogue with the next convolution's input scale; the last adds the
// shortcut in the model's dtype, in which the blocks' outputs (the
// shortcuts), the stem's output, max pooling and global average pooling
// stay. A block's output is quantized once for the next block's first
// convolution and projection, which read the same tensor and share one
// scale; so are the images for the stem and the pooled features for fc.

// qlayer is a convolution or the classifier in int8: W ([Co, Kh, Kw,
// Ci/G] or [classes, features]) with a scale per output channel, the
// static scale of its input (InScale [1], one tensor per site), and the
// bias (the folded BatchNorm's for a convolution) in float32.
type qlayer = layers.Quantized

// Calibration is what Model.Quantize calibrates the inputs' scales with.
type Calibration struct {
	// Batches are run through the float model, each NCHW float32
	// [Batch, 3, Height, Width] as Forward.SetPixels takes it
	// (normalised as the model was trained).
	Batches              [][]float32
	Batch, Height, Width int
	// NewObserver returns a fresh observer; one is made per site, the
	// input that one or two layers read (a block's first convolution
	// and its projection share theirs).
	NewObserver func() quant.Observer
}

// Quantized reports whether the model runs in int8.
func (m *Model) Quantized() bool { return m.fcQ != nil }

// sites maps each layer (torchvision's module name, "fc" for the
// classifier) to its site: the layer whose input it reads, which is
// itself but for a projection, which reads its block's input with the
// block's first convolution.
func (a arch) sites() map[string]string {
	s := map[string]string{a.stem.conv: a.stem.conv, "fc": "fc"}
	for _, st := range a.stages {
		for _, b := range st {
			for _, cv := range b.convs {
				s[cv.conv] = cv.conv
			}
			if b.down != nil {
				s[b.down.conv] = b.convs[0].conv
			}
		}
	}
	return s
}

// Quantize converts the model to W8A8 static int8 (see above): it runs
// the calibration batches through the float model, observing the input of
// every convolution and of the classifier, then quantizes the weights per
// output channel on the device and releases the float weights. It returns
// the per-layer report in torchvision's state_dict order, fc last: each
// named by its module (conv1, layer1.0.conv2, layer1.0.downsample.0, fc),
// a convolution's weight [Co, Kh·Kw·Ci/G] reported as a linear layer's
// over its input's patches, BatchNorm folded in, and the input fields
// those of the layer's site. The
// model must fold its BatchNorms (not Options.Unfolded) and its backend
// implement kernels.Quant and kernels.QuantConv. After an error the model
// may be partly converted: close it.
func (m *Model) Quantize(cal Calibration) ([]quant.LinearReport, error) {
	switch {
	case m.Quantized():
		return nil, fmt.Errorf("resnet: %s is already quantized: %w", m.Config.Name, kernels.ErrValue)
	case m.Options.Unfolded:
		return nil, fmt.Errorf("resnet: %s keeps its BatchNorms unfolded; int8 quantizes the folded convolutions: %w",
			m.Config.Name, kernels.ErrUnsupported)
	}
	qo, err := kernels.Group[kernels.Quant](m.be)
	if err != nil {
		return nil, fmt.Errorf("resnet: %w", err)
	}
	qc, err := kernels.Group[kernels.QuantConv](m.be)
	if err != nil {
		return nil, fmt.Errorf("resnet: %w", err)
	}
	if len(cal.Batches) == 0 || cal.NewObserver == nil {
		return nil, fmt.Errorf("resnet: calibration needs batches and an observer: %w", kernels.ErrValue)
	}
	a := m.Config.arch()
	sites := a.sites()
	cals, err := m.calibrate(cal)
	if err != nil {
		return nil, err
	}
	// Each site's scale, and the error of its input, once.
	scales := map[string]*kernels.Tensor{}
	fixed := map[string]layers.Site{}
	names := []string{}
	for _, cv := range a.convs() {
		names = append(names, cv.conv)
	}
	names = append(names, "fc")
	for _, name := range names {
		site := sites[name]
		if scales[site] != nil {
			continue
		}
		if fixed[site], err = cals.Site(site); err != nil {
			return nil, fmt.Errorf("resnet: %w", err)
		}
		if scales[site], err = m.params.Upload(site+".input_scale", kernels.F32, []float32{fixed[site].Scale}, 1); err != nil {
			return nil, fmt.Errorf("resnet: %w", err)
		}
	}
	m.qo, m.qc = qo, qc
	var reports []quant.LinearReport
	for _, name := range names {
		w, b := m.fcW, m.fcB
		l := m.layers[name] // nil for fc
		if l != nil {
			w, b = l.w, l.b
		}
		site := sites[name]
		q, r, err := layers.QuantizeWeight(m.be, m.params, name, w, b, kernels.I8, scales[site])
		if err != nil {
			return nil, fmt.Errorf("resnet: %w", err)
		}
		if l != nil {
			l.w, l.b, l.q = nil, nil, q
		} else {
			m.fcW, m.fcB, m.fcQ = nil, nil, q
		}
		reports = append(reports, fixed[site].Report(r))
	}
	return reports, nil
}

// calibrate runs the batches through the float model, observing each
// site's input.
func (m *Model) calibrate(cal Calibration) (c *layers.Calibrator, err error) {
	c = layers.NewCalibrator(cal.NewObserver)
	f, err := m.newForward(cal.Batch, cal.Height, cal.Width, c.Observe)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	for b, px := range cal.Batches {
		if want := cal.Batch * 3 * cal.Height * cal.Width; len(px) != want {
			return nil, fmt.Errorf("resnet: calibration batch %d has %d values, want [%d 3 %d %d] = %d: %w",
				b, len(px), cal.Batch, cal.Height, cal.Width, want, kernels.ErrShape)
		}
		if err := f.SetPixels(px); err != nil {
			return nil, fmt.Errorf("resnet: calibration batch %d: %w", b, err)
		}
		if err := f.Run(); err != nil {
			return nil, fmt.Errorf("resnet: calibration batch %d: %w", b, err)
		}
	}
	return c, nil
}
