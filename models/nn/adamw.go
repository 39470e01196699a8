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

// TrainState is what training a model's parameters keeps on the device:
// each parameter's values, its gradient and AdamW's two moments, the
// gradients and moments starting at zero.
//
// In float32 training (DType F32) the values AdamW updates are the ones
// the model reads. In mixed precision (DType BF16 or F16, Megatron-LM's
// --bf16) AdamW updates float32 master values, Masters, and the model
// reads their copy in DType, Values, cast after each update; the model
// writes its gradients in DType, converted to float32 for the update.
type TrainState struct {
	// Params are the trained parameters, in the order of the updates.
	Params []Param
	// DType is the dtype of Values and Grads.
	DType kernels.DType
	// Values and Grads hold each parameter's values and gradient under
	// its name, in DType: the model reads the first and writes the
	// second.
	Values, Grads *TensorSet
	// Masters holds the float32 values AdamW updates: Values itself in
	// float32 training.
	Masters *TensorSet
	m1, m2  *TensorSet
	all     []kernels.AdamWParam // every parameter's tensors for AdamWAll
	steps   int
}

// NewTrainState loads params from src and allocates their zeroed
// gradients and moments on be, all in float32. On an error it frees what
// it allocated.
func NewTrainState(be kernels.Backend, src Source, params []Param) (*TrainState, error) {
	return NewMixedTrainState(be, src, params, kernels.F32)
}

// NewMixedTrainState is NewTrainState with the model's values and
// gradients in dt (F32, BF16 or F16) over float32 masters and moments.
func NewMixedTrainState(be kernels.Backend, src Source, params []Param, dt kernels.DType) (*TrainState, error) {
	if dt != kernels.F32 && dt != kernels.BF16 && dt != kernels.F16 {
		return nil, fmt.Errorf("training in %v: want f32, bf16 or f16: %w", dt, kernels.ErrDType)
	}
	s := &TrainState{Params: params, DType: dt, Masters: NewTensorSet(be), Grads: NewTensorSet(be),
		m1: NewTensorSet(be), m2: NewTensorSet(be)}
	s.Values = s.Masters
	if dt != kernels.F32 {
		s.Values = NewTensorSet(be)
	}
	if err := s.init(be, src); err != nil {
		return nil, errors.Join(err, s.Free())
	}
	return s, nil
}

func (s *TrainState) init(be kernels.Backend, src Source) error {
	if err := LoadParams(s.Masters, src, s.Params, kernels.F32); err != nil {
		return err
	}
	for _, p := range s.Params {
		for _, z := range []struct {
			set *TensorSet
			dt  kernels.DType
		}{{s.Grads, s.DType}, {s.m1, kernels.F32}, {s.m2, kernels.F32}} {
			t, err := z.set.Alloc(p.Name, z.dt, p.Shape...)
			if err != nil {
				return err
			}
			if err := be.Fill(t, 0); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
		}
		x := kernels.AdamWParam{Param: s.Masters.Get(p.Name), Grad: s.Grads.Get(p.Name),
			M: s.m1.Get(p.Name), V: s.m2.Get(p.Name), NoDecay: len(p.Shape) < 2}
		if s.DType != kernels.F32 {
			v, err := s.Values.Alloc(p.Name, s.DType, p.Shape...)
			if err != nil {
				return err
			}
			if err := be.Cast(v, x.Param); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			x.Copy = v
		}
		s.all = append(s.all, x)
	}
	return nil
}

// Update applies one AdamW step of opt to every parameter from its
// gradient, all in one kernels.Ops.AdamWAll. Weight decay applies to
// parameters of two or more dimensions (matrices and embedding tables),
// not to biases and layer-norm weights. In mixed precision each gradient
// is read in its dtype and the updated masters are rounded into Values.
func (s *TrainState) Update(opt AdamW) error {
	s.steps++
	hp := kernels.AdamWParams{LR: opt.LR, Beta1: opt.Beta1, Beta2: opt.Beta2, Eps: opt.Eps, WeightDecay: opt.WeightDecay, Step: s.steps}
	if err := s.Masters.be.AdamWAll(s.all, hp); err != nil {
		return fmt.Errorf("AdamW: %w", err)
	}
	return nil
}

// Steps is the number of updates made.
func (s *TrainState) Steps() int { return s.steps }

// Free releases everything.
func (s *TrainState) Free() error {
	errs := []error{s.m2.Free(), s.m1.Free(), s.Grads.Free(), s.Masters.Free()}
	if s.Values != s.Masters {
		errs = append(errs, s.Values.Free())
	}
	return errors.Join(errs...)
}
