//go:build cuda

package cuda_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	_ "github.com/zbench/zbench/kernels/cpu" // the device list always has cpu
	"github.com/zbench/zbench/kernels/cuda"
	"github.com/zbench/zbench/kernels/kerneltest"
)

// open returns the first GPU, or skips the test when there is none;
// with ZBENCH_REQUIRE_GPU=1 a missing GPU fails it instead.
func open(t *testing.T) *cuda.Backend {
	t.Helper()
	b, err := cuda.New(0)
	if errors.Is(err, kernels.ErrNoDevice) {
		if os.Getenv("ZBENCH_REQUIRE_GPU") == "1" {
			t.Fatalf("ZBENCH_REQUIRE_GPU=1 but %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	return b
}

func TestConformance(t *testing.T) { kerneltest.Run(t, open(t)) }

// TestDeviceList checks that the device list has cuda exactly when a GPU
// opens, and cpu always.
func TestDeviceList(t *testing.T) {
	devs, err := kernels.Available()
	require.NoError(t, err)
	var names []string
	for _, d := range devs {
		names = append(names, d.Name())
	}
	require.NotEmpty(t, names)
	assert.Equal(t, "cpu", names[0])
	_, gpuErr := cuda.New(0)
	if gpuErr != nil {
		require.ErrorIs(t, gpuErr, kernels.ErrNoDevice, "a missing GPU must read as an absent device")
		assert.NotContains(t, names, "cuda")
	} else {
		assert.Contains(t, names, "cuda")
	}
}

func TestInfo(t *testing.T) {
	b := open(t)
	info := b.Info()
	assert.Equal(t, kernels.GPU, info.Kind)
	assert.NotEmpty(t, info.Name)
	assert.Regexp(t, `^\d+\.\d+$`, info.Arch)
	assert.Positive(t, info.Cores)
	assert.Positive(t, info.Memory)
	assert.Positive(t, info.ClockMHz)
	assert.Positive(t, info.L2Bytes)
}

// TestOutOfMemory asks for more than the device has: an error that names
// the request, not a crash.
func TestOutOfMemory(t *testing.T) {
	b := open(t)
	elems := int(b.Info().Memory/4) + 1<<28
	_, err := b.Alloc(kernels.F32, elems)
	require.ErrorIs(t, err, kernels.ErrOutOfMemory)
	assert.Contains(t, err.Error(), "f32")
	x, err := b.Alloc(kernels.F32, 1024) // the device still works
	require.NoError(t, err)
	require.NoError(t, b.Free(x))
}

// TestTimer checks that event timing sees a long fill and that the pool
// reuses memory.
func TestTimer(t *testing.T) {
	b := open(t)
	x, err := b.Alloc(kernels.F32, 64<<20)
	require.NoError(t, err)
	tm, err := b.NewTimer()
	require.NoError(t, err)
	defer tm.Close()
	require.NoError(t, tm.Start())
	for range 10 {
		require.NoError(t, b.Fill(x, 1))
	}
	require.NoError(t, tm.Stop())
	d, err := tm.Elapsed()
	require.NoError(t, err)
	assert.Greater(t, d, time.Microsecond)
	assert.Less(t, d, 10*time.Second)
	require.NoError(t, b.Free(x))
	y, err := b.Alloc(kernels.F32, 64<<20)
	require.NoError(t, err)
	assert.Equal(t, int64(1), b.MemStats().Hits)
	require.NoError(t, b.Free(y))
	require.NoError(t, b.FlushCache())
	require.NoError(t, b.Sync())
}

// TestDeviceErrorAtSync plants an embedding id out of range: the kernel
// cannot return an error, so the next Sync does, naming the id.
func TestDeviceErrorAtSync(t *testing.T) {
	b := open(t)
	table, err := kernels.FromFloat32(b, kernels.F32, make([]float32, 8*4), 8, 4)
	require.NoError(t, err)
	ids, err := kernels.FromInt32(b, []int32{1, 9, 2}, 3)
	require.NoError(t, err)
	out, err := b.Alloc(kernels.F32, 3, 4)
	require.NoError(t, err)
	require.NoError(t, b.Embedding(out, table, ids))
	err = b.Sync()
	require.ErrorIs(t, err, kernels.ErrValue)
	assert.Contains(t, err.Error(), "Embedding: ids[1] = 9 is out of range [0, 8)")
	require.NoError(t, b.Sync(), "the error is reported once")
}
