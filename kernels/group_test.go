package kernels_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
)

// noFP8 is a backend without the FP8 ops.
type noFP8 struct{ kernels.Backend }

// deviceWithoutFP8 is a backend whose device cannot run them.
type deviceWithoutFP8 struct{ *cpu.Backend }

func (deviceWithoutFP8) FP8Supported() error {
	return errors.Join(errors.New("FP8 needs compute capability 8.9 or 9.0"), kernels.ErrUnsupported)
}

// TestGroup checks that Group gives the ops where the device runs them
// and says why not elsewhere.
func TestGroup(t *testing.T) {
	be := cpu.New()
	f, err := kernels.Group[kernels.FP8](be)
	require.NoError(t, err)
	assert.NotNil(t, f)
	_, err = kernels.Group[kernels.FP8](noFP8{be})
	require.ErrorIs(t, err, kernels.ErrUnsupported)
	assert.ErrorContains(t, err, "the cpu backend has no FP8 ops")
	_, err = kernels.Group[kernels.FP8](deviceWithoutFP8{be})
	require.ErrorIs(t, err, kernels.ErrUnsupported)
	assert.ErrorContains(t, err, "compute capability")
	_, err = kernels.Group[kernels.Quant](noFP8{be})
	require.ErrorIs(t, err, kernels.ErrUnsupported)
	assert.ErrorContains(t, err, "the cpu backend has no Quant ops (kernels.Quant)")
	q, err := kernels.Group[kernels.Quant](be)
	require.NoError(t, err)
	assert.NotNil(t, q)
}
