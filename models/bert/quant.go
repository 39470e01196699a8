package bert

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/quant"
)

// INT8 post-training quantization of BERT's encoder: W8A8 static. Every
// linear layer of every encoder layer (query, key, value, attention
// output, intermediate, output) keeps its weight in int8 with one scale per
// output channel and quantizes its input with one scale per tensor fixed
// by calibration; the products run in int8 with int32 sums
// (kernels.Quant), rescaled, biased and activated in float32 and stored in
// the model's dtype. The embeddings, layer norms, the attention core (in
// the precision's attention dtype: float16 for Mixed) and the pooler stay
// in floating point.

// site is where a layer's int8 linears read their input.
type site int

// The four inputs of a layer: query, key and value share one.
const (
	siteQKV site = iota
	siteAttnOut
	siteFFNIn
	siteFFNOut
	numSites
)

// siteLinears names the linear layers reading each site (under
// encoder.layer.N.).
var siteLinears = [numSites][]string{
	{"attention.self.query", "attention.self.key", "attention.self.value"},
	{"attention.output.dense"},
	{"intermediate.dense"},
	{"output.dense"},
}

// FP8 reports whether the model's linears are FP8 (QuantizeFP8).
func (m *Model) FP8() bool { return m.Quantized() && m.w.layers[0].q.Q.FP8() }

// QuantizeFP8 converts every linear layer of the encoder (the pooler
// stays in floating point) to FP8: E4M3 weights with one scale per output
// channel (each row's current scale, cast on the device by kernels.FP8's
// CastFP8Rows) and the bias in float32; the forward passes then cast each
// layer's input to E4M3 per token and multiply in FP8 with float32 sums.
// No calibration: the scales are current. It returns each layer's report
// (the weight's error and bytes). The backend must implement kernels.FP8;
// the model has no checkpoint layout in this form.
func (m *Model) QuantizeFP8() ([]quant.LinearReport, error) {
	if m.Quantized() {
		return nil, fmt.Errorf("bert: the model is already quantized: %w", ErrInput)
	}
	if _, err := kernels.Group[kernels.FP8](m.be); err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	if err := m.splitQKV(); err != nil {
		return nil, err
	}
	var reports []quant.LinearReport
	for i := range m.w.layers {
		l := &m.w.layers[i]
		lins := [numSites][]*linear{{&l.q, &l.k, &l.v}, {&l.o}, {&l.ffnIn}, {&l.ffnOut}}
		for s := range numSites {
			for j, lin := range lins[s] {
				r, err := m.quantizeLinear(lin, nil, layerParam(i, siteLinears[s][j]))
				if err != nil {
					return nil, err
				}
				reports = append(reports, r)
			}
		}
	}
	return reports, nil
}

// Calibration is what Model.Quantize calibrates the inputs' scales with.
type Calibration struct {
	// Batches are run through the float model, each of Batch sequences
	// of Seq tokens.
	Batches    []Inputs
	Batch, Seq int
	// NewObserver returns a fresh observer; one is made per input of
	// every layer.
	NewObserver func() quant.Observer
}

// Quantized reports whether the encoder's linear layers run in int8.
func (m *Model) Quantized() bool { return len(m.w.layers) > 0 && m.w.layers[0].q.Quantized() }

// Quantize converts the encoder's linear layers to W8A8 static int8: it
// runs the calibration batches through the float model, observing each
// linear layer's input, then quantizes the weights per output channel on
// the device. It returns the per-layer report: each weight's error and
// sizes, and the error of its input quantized with the calibrated static
// scale. The model's backend must
// implement kernels.Quant.
func (m *Model) Quantize(cal Calibration) ([]quant.LinearReport, error) {
	if m.Quantized() {
		return nil, fmt.Errorf("bert: the model is already quantized: %w", ErrInput)
	}
	if _, err := kernels.Group[kernels.Quant](m.be); err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	if len(cal.Batches) == 0 || cal.NewObserver == nil {
		return nil, fmt.Errorf("bert: calibration needs batches and an observer: %w", ErrInput)
	}
	if err := m.splitQKV(); err != nil {
		return nil, err
	}
	cals, err := m.calibrate(cal)
	if err != nil {
		return nil, err
	}
	sites := make([][numSites]layers.Site, len(m.w.layers))
	for i := range sites { // all checked before anything is quantized
		for s := range numSites {
			if sites[i][s], err = cals.Site(layerParam(i, siteLinears[s][0])); err != nil {
				return nil, fmt.Errorf("bert: %w (%w)", err, ErrInput)
			}
		}
	}
	var reports []quant.LinearReport
	for i := range m.w.layers {
		l := &m.w.layers[i]
		lins := [numSites][]*linear{{&l.q, &l.k, &l.v}, {&l.o}, {&l.ffnIn}, {&l.ffnOut}}
		for s := range numSites {
			for j, lin := range lins[s] {
				r, err := m.quantizeLinear(lin, &sites[i][s].Scale, layerParam(i, siteLinears[s][j]))
				if err != nil {
					return nil, err
				}
				reports = append(reports, sites[i][s].Report(r))
			}
		}
	}
	m.Config.Quant = quant.W8A8
	return reports, nil
}

// calibrate runs the batches through the float model, observing the
// input of every site (named by the first linear reading it).
func (m *Model) calibrate(cal Calibration) (c *layers.Calibrator, err error) {
	f, err := m.NewForward(cal.Batch, cal.Seq)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	c = layers.NewCalibrator(cal.NewObserver)
	for i := range f.enc.layers {
		f.enc.layers[i].observe = func(s site, x *kernels.Tensor) error {
			return c.Observe(layerParam(i, siteLinears[s][0]), x)
		}
	}
	for b, in := range cal.Batches {
		if err := f.SetInputs(in); err != nil {
			return nil, fmt.Errorf("bert: calibration batch %d: %w", b, err)
		}
		if err := f.Run(); err != nil {
			return nil, fmt.Errorf("bert: calibration batch %d: %w", b, err)
		}
	}
	return c, nil
}

// quantizeLinear quantizes lin's weight per output channel on the device
// and its bias to float32, and reports the weight's error: int8 reading
// its input with the static scale *inScale, or FP8 (E4M3, its input cast
// per token) when inScale is nil.
func (m *Model) quantizeLinear(lin *linear, inScale *float32, name string) (quant.LinearReport, error) {
	codes := kernels.E4M3
	var in *kernels.Tensor
	if inScale != nil {
		codes = kernels.I8
		var err error
		if in, err = m.params.Upload(name+".input_scale", kernels.F32, []float32{*inScale}, 1); err != nil {
			return quant.LinearReport{}, fmt.Errorf("bert: %w", err)
		}
	}
	r, err := lin.Quantize(m.be, m.params, name, codes, in)
	if err != nil {
		return r, fmt.Errorf("bert: %w", errors.Join(err, m.params.Release(in)))
	}
	return r, nil
}
