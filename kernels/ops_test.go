package kernels

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestActivationString(t *testing.T) {
	for a, want := range map[Activation]string{
		ActNone: "none", ActReLU: "relu", ActGELU: "gelu", ActGELUTanh: "gelu_tanh", ActSiLU: "silu", ActTanh: "tanh", 99: "activation(?)",
	} {
		assert.Equal(t, want, a.String(), "activation %d", a)
	}
	assert.Equal(t, Activation(5), ActTanh, "activation codes are shared with the CUDA kernels: append, never renumber")
}

func TestAdamWBiasCorrections(t *testing.T) {
	for _, tc := range []struct {
		p        AdamWParams
		bc1, bc2 float64
	}{
		{AdamWParams{Beta1: 0.5, Beta2: 0.75, Step: 1}, 0.5, 0.25},
		{AdamWParams{Beta1: 0.5, Beta2: 0.75, Step: 3}, 0.875, 1 - 27.0/64},
		{AdamWParams{Beta1: 0, Beta2: 0, Step: 1}, 1, 1},
		{AdamWParams{Beta1: 0.9, Beta2: 0.999, Step: 1}, 1 - float64(float32(0.9)), 1 - float64(float32(0.999))},
	} {
		bc1, bc2 := tc.p.BiasCorrections()
		assert.InDelta(t, tc.bc1, bc1, 1e-15, "%+v", tc.p)
		assert.InDelta(t, tc.bc2, bc2, 1e-15, "%+v", tc.p)
	}
	bc1, bc2 := AdamWParams{Beta1: 0.9, Beta2: 0.999, Step: 1 << 30}.BiasCorrections()
	assert.Equal(t, [2]float64{1, 1}, [2]float64{bc1, bc2}, "no NaN or overflow for large steps")
	assert.False(t, math.IsNaN(bc1))
}
