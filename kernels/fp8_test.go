package kernels_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/zbench/zbench/kernels"
)

func TestFP8Max(t *testing.T) {
	assert.Equal(t, float32(448), kernels.FP8Max(kernels.E4M3))
	assert.Equal(t, float32(57344), kernels.FP8Max(kernels.E5M2))
	assert.Zero(t, kernels.FP8Max(kernels.F32))
}
