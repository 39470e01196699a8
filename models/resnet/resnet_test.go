package resnet

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

// TestParamCounts checks the architecture of every member against
// torchvision's published parameter counts (its model documentation's
// "num_params": trainable parameters, without BatchNorm's running
// statistics).
func TestParamCounts(t *testing.T) {
	want := map[string]int64{
		"resnet18":         11_689_512,
		"resnet34":         21_797_672,
		"resnet50":         25_557_032,
		"resnet101":        44_549_160,
		"resnet152":        60_192_808,
		"resnext50_32x4d":  25_028_904,
		"resnext101_32x8d": 88_791_336,
		"resnext101_64x4d": 83_455_272,
		"wide_resnet50_2":  68_883_240,
		"wide_resnet101_2": 126_886_696,
	}
	require.ElementsMatch(t, Names(), func() []string {
		var ks []string
		for k := range want {
			ks = append(ks, k)
		}
		return ks
	}())
	for name, n := range want {
		t.Run(name, func(t *testing.T) {
			cfg, err := ByName(name)
			require.NoError(t, err)
			require.NoError(t, cfg.Validate())
			var stats int64
			for _, p := range cfg.Params() {
				if strings.HasSuffix(p.Name, ".running_mean") || strings.HasSuffix(p.Name, ".running_var") {
					stats += int64(p.Len())
				}
			}
			assert.Equal(t, n, cfg.CountParams()-stats)
		})
	}
}

func TestFLOPs(t *testing.T) {
	cfg, err := ByName("resnet50")
	require.NoError(t, err)
	// 4.09 GMACs per 224×224 image, as torchvision documents ("GFLOPS"
	// 4.09 there counts multiply-adds).
	assert.InDelta(t, 2*4.09e9, cfg.FLOPs(1, 224, 224), 0.01e9)
	assert.InDelta(t, 8*cfg.FLOPs(1, 224, 224), cfg.FLOPs(8, 224, 224), 1)
}

func TestByNameErrors(t *testing.T) {
	_, err := ByName("resnet51")
	require.ErrorContains(t, err, `unknown model "resnet51"`)
	require.ErrorContains(t, err, "wide_resnet50_2")
	cfg, err := ByName("resnet18")
	require.NoError(t, err)
	cfg.Groups = 2
	require.ErrorContains(t, cfg.Validate(), "basic blocks need groups 1")
	cfg, _ = ByName("resnet50")
	cfg.NumClasses = 0
	require.ErrorContains(t, cfg.Validate(), "0 classes")
}

// smallInput is a seeded batch of normal pixels.
func smallInput(n, h, w int) []float32 {
	r := rand.New(rand.NewPCG(uint64(n*h*w), 3))
	px := make([]float32, n*3*h*w)
	for i := range px {
		px[i] = float32(r.NormFloat64())
	}
	return px
}

func logitsOf(t *testing.T, m *Model, px []float32, n, h, w int) []float32 {
	t.Helper()
	f, err := m.NewForward(n, h, w)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	require.NoError(t, f.SetPixels(px))
	require.NoError(t, f.Run())
	l, err := f.Logits()
	require.NoError(t, err)
	return l
}

// TestFoldingChangesOnlyRounding runs ResNeXt (grouped convolutions,
// projections) folded and unfolded, and in f16 and bf16.
func TestFoldingChangesOnlyRounding(t *testing.T) {
	be := cpu.New()
	cfg, err := ByName("resnext50_32x4d")
	require.NoError(t, err)
	cfg.NumClasses = 10
	src := Synthetic(cfg, 11)
	px := smallInput(2, 40, 36)
	run := func(o Options) []float64 {
		m, err := Load(be, cfg, src, o)
		require.NoError(t, err)
		defer func() { require.NoError(t, m.Close()) }()
		l := logitsOf(t, m, px, 2, 40, 36)
		out := make([]float64, len(l))
		for i, v := range l {
			out[i] = float64(v)
		}
		return out
	}
	folded := run(Options{})
	for _, c := range []struct {
		o   Options
		tol float64
	}{
		{Options{Unfolded: true}, 1e-5},
		{Options{Precision: nn.BF16}, 0.1},
		{Options{Precision: nn.F16}, 1e-2},
	} {
		rel, _ := kernels.RelErr(run(c.o), folded)
		assert.LessOrEqualf(t, rel, c.tol, "%+v against folded f32", c.o)
	}
}

func TestStage(t *testing.T) {
	cfg, err := ByName("resnet18")
	require.NoError(t, err)
	m, err := Load(cpu.New(), cfg, Synthetic(cfg, 3), Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	f, err := m.NewForward(1, 64, 96)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	require.NoError(t, f.SetPixels(smallInput(1, 64, 96)))
	for s, want := range [][]int{{1, 64, 16, 24}, {1, 128, 8, 12}, {1, 256, 4, 6}, {1, 512, 2, 3}} {
		v, shape, err := f.Stage(s + 1)
		require.NoError(t, err)
		assert.Equal(t, want, shape)
		assert.Len(t, v, kernels.Shape(want).Len())
	}
	_, _, err = f.Stage(5)
	require.ErrorContains(t, err, "stage 5")
	require.ErrorContains(t, f.SetPixels(make([]float32, 7)), "pixel_values has 7 values")
	_, err = m.NewForward(1, 31, 64)
	require.ErrorContains(t, err, "at least 32×32")
}

// TestCheckpointErrors writes torchvision-named checkpoints with one
// thing wrong each and requires an error naming it.
func TestCheckpointErrors(t *testing.T) {
	cfg, err := ByName("resnet18")
	require.NoError(t, err)
	cfg.NumClasses = 10
	src := Synthetic(cfg, 1)
	write := func(t *testing.T, edit func(map[string]safetensors.Tensor)) string {
		ts := map[string]safetensors.Tensor{}
		for _, p := range cfg.Params() {
			v, err := src.Values(p)
			require.NoError(t, err)
			ts[p.Name] = f32Tensor(p.Name, v, p.Shape...)
		}
		edit(ts)
		var list []safetensors.Tensor
		for _, v := range ts {
			list = append(list, v)
		}
		var buf bytes.Buffer
		require.NoError(t, safetensors.Write(&buf, list, map[string]string{"format": "pt"}))
		path := filepath.Join(t.TempDir(), "model.safetensors")
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		return path
	}
	for _, c := range []struct {
		name string
		edit func(map[string]safetensors.Tensor)
		want string
	}{
		{"missing", func(ts map[string]safetensors.Tensor) { delete(ts, "layer3.1.bn2.running_var") }, `missing tensor "layer3.1.bn2.running_var"`},
		{"extra", func(ts map[string]safetensors.Tensor) {
			ts["layer5.0.conv1.weight"] = f32Tensor("layer5.0.conv1.weight", []float32{1}, 1)
		}, "layer5.0.conv1.weight"},
		{"shape", func(ts map[string]safetensors.Tensor) {
			ts["layer2.0.downsample.0.weight"] = f32Tensor("layer2.0.downsample.0.weight", make([]float32, 128*64), 128, 64, 1)
		}, `"layer2.0.downsample.0.weight" has shape [128 64 1]`},
		{"variance", func(ts map[string]safetensors.Tensor) {
			v := make([]float32, 64)
			v[5] = -1
			ts["bn1.running_var"] = f32Tensor("bn1.running_var", v, 64)
		}, "bn1.running_var[5] = -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ck, err := OpenCheckpoint(write(t, c.edit))
			require.NoError(t, err)
			_, err = Load(cpu.New(), cfg, ck, Options{})
			require.ErrorIs(t, err, nn.ErrWeights)
			require.ErrorContains(t, err, c.want)
		})
	}
	ck, err := OpenCheckpoint(write(t, func(map[string]safetensors.Tensor) {}))
	require.NoError(t, err)
	_, err = FromCheckpoint("resnet50", ck)
	require.ErrorContains(t, err, "fc.weight has shape [10 512], want [classes 2048] for resnet50")
	got, err := FromCheckpoint("resnet18", ck)
	require.NoError(t, err)
	assert.Equal(t, 10, got.NumClasses)
}

// f32Tensor is a safetensors F32 tensor holding vals.
func f32Tensor(name string, vals []float32, shape ...int) safetensors.Tensor {
	data := make([]byte, 4*len(vals))
	_ = kernels.EncodeFloat32(kernels.F32, data, vals) // sizes match by construction
	return safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: data}
}
