package cpu

import (
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
)

// AdamW applies one torch.optim.AdamW update in float32, updating param, m
// and v in place, in the order and with the scalars of PyTorch's
// single-tensor implementation: the scalars (1 − LR·WeightDecay, 1 − β,
// LR/bc1, sqrt(bc2)) are computed in float64 and rounded to float32 once.
func (b *Backend) AdamW(param, grad, m, v *kernels.Tensor, p kernels.AdamWParams) error {
	n, err := check.AdamW("cpu: AdamW", b, param, grad, m, v, p)
	if err != nil {
		return err
	}
	s := newAdamwStep(p)
	pv, gv, mv, vv := f32(param)[:n], f32(grad)[:n], f32(m)[:n], f32(v)[:n]
	parallelFor(n, 8, func(lo, hi int) { s.apply(pv[lo:hi], gv[lo:hi], mv[lo:hi], vv[lo:hi]) })
	return nil
}

// AdamWAll applies AdamW's update to every parameter of ps, widening a
// 16-bit gradient and narrowing the updated values into Copy a block of
// elements at a time.
func (b *Backend) AdamWAll(ps []kernels.AdamWParam, p kernels.AdamWParams) error {
	if err := check.AdamWAll("cpu: AdamWAll", b, ps, p); err != nil {
		return err
	}
	decayed, plain := newAdamwStep(p), p
	plain.WeightDecay = 0
	undecayed := newAdamwStep(plain)
	for _, x := range ps {
		s := decayed
		if x.NoDecay {
			s = undecayed
		}
		n := x.Param.Len()
		pv, mv, vv := f32(x.Param)[:n], f32(x.M)[:n], f32(x.V)[:n]
		parallelFor(n, 8, func(lo, hi int) {
			var buf [adamwBlock]float32
			for lo < hi {
				e := min(hi, lo+adamwBlock)
				gv := buf[:e-lo]
				if g := x.Grad.DType(); g == kernels.F32 {
					gv = f32(x.Grad)[lo:e]
				} else {
					widen16(g, gv, u16(x.Grad)[lo:e])
				}
				s.apply(pv[lo:e], gv, mv[lo:e], vv[lo:e])
				if x.Copy != nil {
					narrow16(x.Copy.DType(), u16(x.Copy)[lo:e], pv[lo:e])
				}
				lo = e
			}
		})
	}
	return nil
}

// adamwBlock is the elements AdamWAll widens and narrows at a time.
const adamwBlock = 1024

// adamwStep is one AdamW update's float32 scalars, computed in float64 and
// rounded once.
type adamwStep struct {
	decay, stepSize, bc2Sqrt, b1, b2, c1, c2, eps float32
}

func newAdamwStep(p kernels.AdamWParams) adamwStep {
	bc1, bc2 := p.BiasCorrections()
	return adamwStep{
		decay:    float32(1 - float64(p.LR)*float64(p.WeightDecay)),
		stepSize: float32(float64(p.LR) / bc1),
		bc2Sqrt:  float32(math.Sqrt(bc2)),
		b1:       p.Beta1, b2: p.Beta2, eps: p.Eps,
		c1: float32(1 - float64(p.Beta1)), c2: float32(1 - float64(p.Beta2)),
	}
}

// apply updates pv, mv and vv from the gradient gv, all of one length.
func (s adamwStep) apply(pv, gv, mv, vv []float32) {
	gv, mv, vv = gv[:len(pv)], mv[:len(pv)], vv[:len(pv)]
	for i, g := range gv {
		mi := s.b1*mv[i] + s.c1*g
		vi := s.b2*vv[i] + s.c2*(g*g)
		mv[i], vv[i] = mi, vi
		denom := float32(math.Sqrt(float64(vi)))/s.bc2Sqrt + s.eps
		pv[i] = pv[i]*s.decay - s.stepSize*(mi/denom)
	}
}
