package nn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

func TestParsePrecision(t *testing.T) {
	for _, p := range []nn.Precision{nn.F32, nn.F16, nn.BF16, nn.Mixed} {
		got, err := nn.ParsePrecision(p.String())
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
	assert.Equal(t, "f32", nn.F32.String())
	assert.Equal(t, "mixed", nn.Mixed.String())
	assert.Equal(t, kernels.F32, nn.Mixed.DType())
	assert.Equal(t, kernels.F16, nn.F16.DType())
	assert.Equal(t, kernels.BF16, nn.BF16.DType())
	for _, s := range []string{"", "fp32", "F32", "int8", "precision(0)"} {
		_, err := nn.ParsePrecision(s)
		require.Error(t, err, s)
		assert.Contains(t, err.Error(), `"`+s+`"`)
	}
	assert.Equal(t, "precision(9)", nn.Precision(9).String())
}

func TestPrecisionDTypes(t *testing.T) {
	for _, tc := range []struct {
		p           nn.Precision
		valid       bool
		dtype, attn kernels.DType
	}{
		{nn.F32, true, kernels.F32, kernels.F32},
		{nn.F16, true, kernels.F16, kernels.F16},
		{nn.BF16, true, kernels.BF16, kernels.BF16},
		{nn.Mixed, true, kernels.F32, kernels.F16},
		{0, false, kernels.F32, kernels.F32},
		{nn.Mixed + 1, false, kernels.F32, kernels.F32},
	} {
		t.Run(tc.p.String(), func(t *testing.T) {
			assert.Equal(t, tc.valid, tc.p.Valid())
			assert.Equal(t, tc.dtype, tc.p.DType())
			assert.Equal(t, tc.attn, tc.p.AttnDType())
		})
	}
}
