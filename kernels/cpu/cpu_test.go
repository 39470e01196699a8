package cpu_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/kernels/kerneltest"
)

func TestConformance(t *testing.T) { kerneltest.Run(t, cpu.New()) }

func TestUploadInt32(t *testing.T) {
	be := cpu.New()
	x, err := kernels.FromInt32(be, []int32{1, -2, 3}, 3)
	require.NoError(t, err)
	require.NoError(t, kernels.UploadInt32(x, []int32{7, -8, 1 << 30}))
	got, err := kernels.ToFloat32(x)
	require.NoError(t, err)
	assert.Equal(t, []float32{7, -8, 1 << 30}, got)
	require.ErrorIs(t, kernels.UploadInt32(x, []int32{1, 2}), kernels.ErrShape, "wrong length")
	f, err := be.Alloc(kernels.F32, 3)
	require.NoError(t, err)
	require.ErrorIs(t, kernels.UploadInt32(f, []int32{1, 2, 3}), kernels.ErrShape, "not I32")
}
