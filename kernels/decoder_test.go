package kernels_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/zbench/zbench/kernels"
)

func TestIndexOfMax(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tc := range []struct {
		name string
		v    []float32
		want int
	}{
		{"empty", nil, -1},
		{"one", []float32{-3}, 0},
		{"largest", []float32{1, 5, 2}, 1},
		{"first of ties", []float32{1, 5, 5}, 1},
		{"infinity", []float32{1, inf, 5}, 1},
		{"NaN is the largest", []float32{1, inf, nan, 5}, 2},
		{"the first NaN", []float32{nan, 9, nan}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, kernels.IndexOfMax(tc.v))
		})
	}
}
