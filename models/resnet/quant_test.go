package resnet

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
)

// calibration is two seeded batches of n images of h×w, observed by
// absmax.
func calibration(n, h, w int) Calibration {
	return Calibration{
		Batches: [][]float32{smallInput(n, h, w), smallInput(n, h+1, w)[:n*3*h*w]},
		Batch:   n, Height: h, Width: w,
		NewObserver: func() quant.Observer { return quant.NewAbsMax() },
	}
}

// TestQuantize converts ResNet-18 (basic blocks) and ResNeXt-50 (grouped
// bottlenecks) with a 10-class head, in f32 and a 16-bit precision each
// (one of each in -short mode), and checks the report, the memory and the
// logits against the float model's.
func TestQuantize(t *testing.T) {
	be := cpu.New()
	for _, c := range []struct {
		model string
		prec  nn.Precision
		tol   float64 // rel-err of the logits against the float model's
		short bool    // run in -short mode
	}{
		{"resnet18", nn.F32, 0.05, true},
		{"resnet18", nn.BF16, 0.1, false},
		{"resnext50_32x4d", nn.F32, 0.1, false},
		{"resnext50_32x4d", nn.F16, 0.1, true},
	} {
		if testing.Short() && !c.short {
			continue
		}
		t.Run(fmt.Sprintf("%s/%v", c.model, c.prec), func(t *testing.T) {
			cfg, err := ByName(c.model)
			require.NoError(t, err)
			cfg.NumClasses = 10
			m, err := Load(be, cfg, Synthetic(cfg, 5), Options{Precision: c.prec})
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close()) }()
			px := smallInput(2, 40, 36)
			want := logitsOf(t, m, px, 2, 40, 36)
			floatBytes := m.WeightBytes()

			require.False(t, m.Quantized())
			rep, err := m.Quantize(calibration(2, 40, 36))
			require.NoError(t, err)
			require.True(t, m.Quantized())
			convs := cfg.arch().convs()
			require.Len(t, rep, len(convs)+1)
			byName := map[string]quant.LinearReport{}
			for i, r := range rep {
				if i < len(convs) {
					assert.Equal(t, convs[i].conv, r.Name, "report %d", i)
				}
				byName[r.Name] = r
				assert.Greater(t, r.WeightSQNR, 45.0, "%s: uniform weights quantize at 48 dB", r.Name)
				assert.Greater(t, r.InputSQNR, 20.0, r.Name)
				assert.Positive(t, r.InputMSE, r.Name)
				assert.Equal(t, r.F32Bytes, 2*r.F16Bytes, r.Name)
				assert.Less(t, r.Bytes, r.F16Bytes, r.Name)
			}
			assert.Equal(t, "fc", rep[len(rep)-1].Name)
			// A projection reads its block's input with the block's first
			// convolution: one site, one scale.
			down := byName["layer2.0.downsample.0"]
			first := byName["layer2.0.conv1"]
			assert.Equal(t, first.InputAmax, down.InputAmax)
			assert.Equal(t, first.InputSQNR, down.InputSQNR)
			// About a byte per weight, against the float model's size.
			assert.Less(t, float64(m.WeightBytes()), 1.2*float64(floatBytes)/float64(c.prec.DType().Size()))

			got := logitsOf(t, m, px, 2, 40, 36)
			rel, _ := kernels.RelErr(widen64(got), widen64(want))
			t.Logf("rel-err of int8 logits against %v: %.3g", c.prec, rel)
			assert.LessOrEqual(t, rel, c.tol)

			// The stages still give the outputs of layer1 … layer4.
			f, err := m.NewForward(1, 32, 32)
			require.NoError(t, err)
			defer func() { require.NoError(t, f.Close()) }()
			require.NoError(t, f.SetPixels(smallInput(1, 32, 32)))
			v, shape, err := f.Stage(4)
			require.NoError(t, err)
			assert.Equal(t, []int{1, cfg.Features(), 1, 1}, shape)
			for i, x := range v {
				require.False(t, math.IsNaN(float64(x)) || math.IsInf(float64(x), 0), "layer4[%d] = %v", i, x)
			}
		})
	}
}

// noQuantConv is a backend with the vision ops and kernels.Quant but no
// int8 convolution.
type noQuantConv struct {
	kernels.Backend
	kernels.Vision
	kernels.Quant
}

func TestQuantizeErrors(t *testing.T) {
	be := cpu.New()
	cfg, err := ByName("resnet18")
	require.NoError(t, err)
	cfg.NumClasses = 10
	load := func(o Options) *Model {
		m, err := Load(be, cfg, Synthetic(cfg, 5), o)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, m.Close()) })
		return m
	}
	ok := calibration(1, 32, 32)
	// The failures leave the model as it was: one model serves them all.
	m := load(Options{})
	for _, c := range []struct {
		name     string
		m        *Model
		cal      Calibration
		sentinel error
		want     string
	}{
		{"unfolded", load(Options{Unfolded: true}), ok, kernels.ErrUnsupported, "unfolded"},
		{"no batches", m, Calibration{Batch: 1, Height: 32, Width: 32, NewObserver: ok.NewObserver}, kernels.ErrValue, "calibration needs batches"},
		{"no observer", m, Calibration{Batches: ok.Batches, Batch: 1, Height: 32, Width: 32}, kernels.ErrValue, "observer"},
		{"batch size", m, Calibration{Batches: [][]float32{make([]float32, 5)}, Batch: 1, Height: 32, Width: 32, NewObserver: ok.NewObserver},
			kernels.ErrShape, "calibration batch 0 has 5 values, want [1 3 32 32] = 3072"},
		{"image size", m, Calibration{Batches: ok.Batches, Batch: 1, Height: 16, Width: 32, NewObserver: ok.NewObserver},
			nil, "at least 32×32"},
		{"nan", m, Calibration{Batches: [][]float32{func() []float32 {
			px := smallInput(1, 32, 32)
			px[7] = float32(math.NaN())
			return px
		}()}, Batch: 1, Height: 32, Width: 32, NewObserver: ok.NewObserver}, kernels.ErrValue, "calibration of the input of conv1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.m.Quantize(c.cal)
			require.Error(t, err)
			if c.sentinel != nil {
				require.ErrorIs(t, err, c.sentinel)
			}
			require.ErrorContains(t, err, c.want)
			require.False(t, c.m.Quantized())
		})
	}
	t.Run("twice", func(t *testing.T) {
		_, err := m.Quantize(ok)
		require.NoError(t, err)
		_, err = m.Quantize(ok)
		require.ErrorIs(t, err, kernels.ErrValue)
		require.ErrorContains(t, err, "already quantized")
	})
	t.Run("backend", func(t *testing.T) {
		m, err := Load(noQuantConv{be, be, be}, cfg, Synthetic(cfg, 5), Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, m.Close()) }()
		_, err = m.Quantize(ok)
		require.ErrorIs(t, err, kernels.ErrUnsupported)
		require.ErrorContains(t, err, "the cpu backend has no QuantConv ops (kernels.QuantConv)")
	})
}

func widen64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
