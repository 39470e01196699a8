package nn

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
)

// AdamW are the optimiser's hyper-parameters, with torch.optim.AdamW's
// semantics.
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
}

// TrainState is what training a model's parameters keeps on the device,
// in float32: each parameter's values, its gradient and AdamW's two
// moments, the gradients and moments starting at zero.
type TrainState struct {
	// Params are the trained parameters, in the order of the updates.
	Params []Param
	// Values and Grads hold each parameter's values and gradient under
	// its name: the model reads the first and writes the second.
	Values, Grads *TensorSet
	m1, m2        *TensorSet
	steps         int
}

// NewTrainState loads params from src and allocates their zeroed
// gradients and moments on be. On an error it frees what it allocated.
func NewTrainState(be kernels.Backend, src Source, params []Param) (*TrainState, error) {
	s := &TrainState{Params: params, Values: NewTensorSet(be), Grads: NewTensorSet(be), m1: NewTensorSet(be), m2: NewTensorSet(be)}
	if err := s.init(be, src); err != nil {
		return nil, errors.Join(err, s.Free())
	}
	return s, nil
}

func (s *TrainState) init(be kernels.Backend, src Source) error {
	if err := LoadParams(s.Values, src, s.Params, kernels.F32); err != nil {
		return err
	}
	for _, p := range s.Params {
		for _, set := range []*TensorSet{s.Grads, s.m1, s.m2} {
			z, err := set.Alloc(p.Name, kernels.F32, p.Shape...)
			if err != nil {
				return err
			}
			if err := be.Fill(z, 0); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
		}
	}
	return nil
}

// Update applies one AdamW step of opt to every parameter from its
// gradient. Weight decay applies to parameters of two or more dimensions
// (matrices and embedding tables), not to biases and layer-norm weights.
func (s *TrainState) Update(opt AdamW) error {
	s.steps++
	be := s.Values.be
	for _, p := range s.Params {
		hp := kernels.AdamWParams{LR: opt.LR, Beta1: opt.Beta1, Beta2: opt.Beta2, Eps: opt.Eps, Step: s.steps}
		if len(p.Shape) >= 2 {
			hp.WeightDecay = opt.WeightDecay
		}
		if err := be.AdamW(s.Values.Get(p.Name), s.Grads.Get(p.Name), s.m1.Get(p.Name), s.m2.Get(p.Name), hp); err != nil {
			return fmt.Errorf("AdamW %s: %w", p.Name, err)
		}
	}
	return nil
}

// Steps is the number of updates made.
func (s *TrainState) Steps() int { return s.steps }

// Free releases everything.
func (s *TrainState) Free() error {
	return errors.Join(s.m2.Free(), s.m1.Free(), s.Grads.Free(), s.Values.Free())
}
