package layers

import (
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/quant"
)

// Calibrator observes the inputs of a model's int8 layers over calibration
// batches, one observer per site (an input that one or more layers read,
// named by the model), and turns what it saw into each site's static
// scale: W8A8 static's calibration, the same for every model.
type Calibrator struct {
	newObserver func() quant.Observer
	obs         map[string]quant.Observer
	last        map[string][]float32
}

// NewCalibrator returns a calibrator that makes each site's observer with
// newObserver.
func NewCalibrator(newObserver func() quant.Observer) *Calibrator {
	return &Calibrator{newObserver: newObserver, obs: map[string]quant.Observer{}, last: map[string][]float32{}}
}

// Observe adds x, the input of site in this batch, to the site's observer.
func (c *Calibrator) Observe(site string, x *kernels.Tensor) error {
	v, err := kernels.ToFloat32(x)
	if err != nil {
		return err
	}
	o := c.obs[site]
	if o == nil {
		o = c.newObserver()
		c.obs[site] = o
	}
	c.last[site] = v
	if err := o.Observe(v); err != nil {
		return fmt.Errorf("calibration of the input of %s: %w", site, err)
	}
	return nil
}

// Site is what calibration fixed for one site: the clipping point, the
// int8 scale, and the error of the last batch's values quantized with it.
type Site struct {
	Amax, Scale float32
	Err         quant.Errors
}

// Site returns site's calibrated amax, scale and input error. An amax
// that is not positive and finite, or a site never observed, is an error
// naming the site.
func (c *Calibrator) Site(site string) (Site, error) {
	o := c.obs[site]
	if o == nil {
		return Site{}, fmt.Errorf("input of %s: never observed: %w", site, quant.ErrNoData)
	}
	a, err := o.Amax()
	if err != nil {
		return Site{}, fmt.Errorf("input of %s: %w", site, err)
	}
	if !(a > 0) || math.IsInf(float64(a), 0) {
		return Site{}, fmt.Errorf("input of %s: calibrated amax %v, want a positive finite value: %w", site, a, kernels.ErrValue)
	}
	s := Site{Amax: a, Scale: quant.Scale(a)}
	fq, err := quant.FakeQuantize(c.last[site], []float32{s.Scale})
	if err != nil {
		return Site{}, fmt.Errorf("input of %s: %w", site, err)
	}
	if s.Err, err = quant.Measure(c.last[site], fq); err != nil {
		return Site{}, fmt.Errorf("input of %s: %w", site, err)
	}
	return s, nil
}

// Report fills r's input fields from s.
func (s Site) Report(r quant.LinearReport) quant.LinearReport {
	r.InputAmax, r.InputMSE, r.InputSQNR = s.Amax, s.Err.MSE, s.Err.SQNR
	return r
}
