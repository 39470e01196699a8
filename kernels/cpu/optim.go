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
	bc1, bc2 := p.BiasCorrections()
	decay := float32(1 - float64(p.LR)*float64(p.WeightDecay))
	stepSize := float32(float64(p.LR) / bc1)
	bc2Sqrt := float32(math.Sqrt(bc2))
	b1, b2, eps := p.Beta1, p.Beta2, p.Eps
	c1, c2 := float32(1-float64(b1)), float32(1-float64(b2))
	pv, gv, mv, vv := f32(param)[:n], f32(grad)[:n], f32(m)[:n], f32(v)[:n]
	parallelFor(n, 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g := gv[i]
			mi := b1*mv[i] + c1*g
			vi := b2*vv[i] + c2*(g*g)
			mv[i], vv[i] = mi, vi
			denom := float32(math.Sqrt(float64(vi)))/bc2Sqrt + eps
			pv[i] = pv[i]*decay - stepSize*(mi/denom)
		}
	})
	return nil
}
