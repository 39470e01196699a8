package resnet

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

// quantizedModel loads the named model with a 10-class head (and the
// given blocks per stage, unless zero) from seeded synthetic weights and
// quantizes it.
func quantizedModel(t *testing.T, be kernels.Backend, name string, layers [4]int, prec nn.Precision) *Model {
	t.Helper()
	cfg, err := ByName(name)
	require.NoError(t, err)
	cfg.NumClasses = 10
	if layers != [4]int{} {
		cfg.Layers = layers
	}
	m, err := Load(be, cfg, Synthetic(cfg, 5), Options{Precision: prec})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	_, err = m.Quantize(calibration(1, 32, 32))
	require.NoError(t, err)
	return m
}

// openTensors is a checkpoint of tensors, read from memory.
func openTensors(t *testing.T, ts []safetensors.Tensor) *nn.Checkpoint {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, ts, nil))
	f, err := safetensors.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	ck, err := nn.NewCheckpoint([]*safetensors.File{f}, names)
	require.NoError(t, err)
	return ck
}

// writeCheckpoint writes tensors to a safetensors file in a temporary
// directory and returns its path.
func writeCheckpoint(t *testing.T, ts []safetensors.Tensor) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, ts, map[string]string{"format": "pt"}))
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// TestQuantizedCheckpoint writes quantized ResNet-18 (basic blocks) and a
// ResNeXt-50 of one block per stage (grouped bottlenecks, each stage's
// with a projection; in f16) as checkpoints, checks their tensors against
// the float weights they came from, and requires the models loaded from
// them to give the quantized models' logits bit for bit and to write the
// same tensors again.
func TestQuantizedCheckpoint(t *testing.T) {
	be := cpu.New()
	for _, c := range []struct {
		model  string
		layers [4]int // zero for the family's
		prec   nn.Precision
		wTol   float64 // of a dequantized weight, besides half a step
	}{
		{"resnet18", [4]int{}, nn.F32, 1e-6},
		{"resnext50_32x4d", [4]int{1, 1, 1, 1}, nn.F16, 1e-3},
	} {
		t.Run(fmt.Sprintf("%s/%v", c.model, c.prec), func(t *testing.T) {
			m := quantizedModel(t, be, c.model, c.layers, c.prec)
			cfg := m.Config
			px := smallInput(2, 40, 36)
			want := logitsOf(t, m, px, 2, 40, 36)

			ts, err := m.QuantizedTensors()
			require.NoError(t, err)
			byName := map[string]safetensors.Tensor{}
			var names []string
			for _, x := range ts {
				names = append(names, x.Name)
				byName[x.Name] = x
			}
			var wantNames []string
			layers := map[string][]int{"fc": {cfg.NumClasses, cfg.Features()}}
			for _, cv := range cfg.arch().convs() {
				layers[cv.conv] = []int{cv.co, cv.ci / cv.grp, cv.k, cv.k}
				wantNames = append(wantNames, cv.conv+".weight", cv.conv+".weight_scale", cv.conv+".input_scale", cv.conv+".bias")
			}
			wantNames = append(wantNames, "fc.weight", "fc.weight_scale", "fc.input_scale", "fc.bias")
			require.Equal(t, wantNames, names)
			for n, shape := range layers {
				for suffix, want := range map[string]struct {
					dtype string
					shape []int
				}{".weight": {"I8", shape}, ".weight_scale": {"F32", []int{shape[0], 1}}, ".input_scale": {"F32", []int{1}}, ".bias": {"F32", shape[:1]}} {
					x := byName[n+suffix]
					assert.Equal(t, want.dtype, x.DType, n+suffix)
					assert.Equal(t, want.shape, x.Shape, n+suffix)
				}
			}
			// A projection stores its block's scale.
			assert.Equal(t, byName["layer2.0.conv1.input_scale"].Data, byName["layer2.0.downsample.0.input_scale"].Data)
			// The codes are in torchvision's layout: times their scales,
			// they are the folded float weights, within half a step.
			src := Synthetic(cfg, 5)
			for _, cv := range []conv{cfg.arch().stem, cfg.arch().stages[0][0].convs[1]} {
				checkFolded(t, src, cv, byName, c.wTol)
			}

			path := writeCheckpoint(t, ts)
			ck, err := OpenCheckpoint(path)
			require.NoError(t, err)
			require.True(t, IsQuantized(ck))
			got, err := FromCheckpoint(c.model, ck)
			require.NoError(t, err)
			if c.layers == [4]int{} {
				require.Equal(t, cfg, got)
			}
			got.Layers = cfg.Layers
			m2, err := Load(be, got, ck, Options{Precision: c.prec})
			require.NoError(t, err)
			defer func() { require.NoError(t, m2.Close()) }()
			require.True(t, m2.Quantized())
			assert.Equal(t, m.WeightBytes(), m2.WeightBytes())
			require.Equal(t, want, logitsOf(t, m2, px, 2, 40, 36), "logits of the reloaded model")
			again, err := m2.QuantizedTensors()
			require.NoError(t, err)
			require.Equal(t, ts, again)
		})
	}
}

// checkFolded checks cv's stored codes and bias against its float weights
// and BatchNorm from src, folded in float64: each code times its channel's
// scale within half a step (and tol relative) of the folded weight.
func checkFolded(t *testing.T, src nn.Source, cv conv, ts map[string]safetensors.Tensor, tol float64) {
	t.Helper()
	shape := []int{cv.co, cv.ci / cv.grp, cv.k, cv.k}
	w, err := src.Values(nn.Param{Name: cv.conv + ".weight", Shape: shape})
	require.NoError(t, err)
	var bn [4][]float32
	for i, f := range bnFields {
		bn[i], err = src.Values(nn.Param{Name: cv.bn + "." + f, Shape: []int{cv.co}})
		require.NoError(t, err)
	}
	codes := ts[cv.conv+".weight"].Data
	scales, err := ts[cv.conv+".weight_scale"].Float32()
	require.NoError(t, err)
	bias, err := ts[cv.conv+".bias"].Float32()
	require.NoError(t, err)
	per := len(w) / cv.co
	for i, v := range w {
		o := i / per
		s := float64(bn[0][o]) / math.Sqrt(float64(bn[3][o])+BNEps)
		folded := float64(v) * s
		got := float64(int8(codes[i])) * float64(scales[o])
		require.InDelta(t, folded, got, 0.5*float64(scales[o])*(1+1e-6)+tol*math.Abs(folded), "%s.weight[%d]", cv.conv, i)
		if i%per == 0 {
			b := float64(bn[1][o]) - float64(bn[2][o])*s
			require.InDelta(t, b, float64(bias[o]), 1e-6+tol*math.Abs(b), "%s.bias[%d]", cv.conv, o)
		}
	}
}

// noQuant is a backend with the vision ops but no int8 ops.
type noQuant struct {
	kernels.Backend
	kernels.Vision
}

// TestQuantizedCheckpointErrors loads quantized ResNet-18 checkpoints with
// one thing wrong each, or on a backend or with options that cannot run
// them, and requires an error naming it.
func TestQuantizedCheckpointErrors(t *testing.T) {
	be := cpu.New()
	m := quantizedModel(t, be, "resnet18", [4]int{}, nn.F32)
	cfg := m.Config
	good, err := m.QuantizedTensors()
	require.NoError(t, err)
	// edit returns the good tensors with fn applied to a copy of the one
	// named (deleted when fn returns false).
	edit := func(name string, fn func(*safetensors.Tensor) bool) []safetensors.Tensor {
		var out []safetensors.Tensor
		found := false
		for _, x := range good {
			if x.Name == name {
				found = true
				x.Data = slices.Clone(x.Data)
				if !fn(&x) {
					continue
				}
			}
			out = append(out, x)
		}
		require.True(t, found, name)
		return out
	}
	setF32 := func(i int, v float32) func(*safetensors.Tensor) bool {
		return func(x *safetensors.Tensor) bool {
			binary.LittleEndian.PutUint32(x.Data[4*i:], math.Float32bits(v))
			return true
		}
	}
	scaleOf := func(name string) float32 {
		for _, x := range good {
			if x.Name == name {
				v, err := x.Float32()
				require.NoError(t, err)
				return v[0]
			}
		}
		t.Fatal(name)
		return 0
	}
	extra := f32Tensor("bn1.weight", make([]float32, 64), 64)
	for _, c := range []struct {
		name     string
		tensors  []safetensors.Tensor
		be       kernels.Backend
		cfg      string // "" for resnet18
		opts     Options
		sentinel error
		want     string
	}{
		{name: "missing", tensors: edit("layer3.1.conv2.weight_scale", func(*safetensors.Tensor) bool { return false }),
			sentinel: nn.ErrWeights, want: `missing tensor "layer3.1.conv2.weight_scale"`},
		{name: "missing fc", tensors: edit("fc.input_scale", func(*safetensors.Tensor) bool { return false }),
			sentinel: nn.ErrWeights, want: `missing tensor "fc.input_scale"`},
		{name: "scale shape", tensors: edit("layer1.0.conv1.weight_scale", func(x *safetensors.Tensor) bool { x.Shape = []int{64}; return true }),
			sentinel: nn.ErrWeights, want: `"layer1.0.conv1.weight_scale" has shape [64], the config wants [64 1]`},
		{name: "device layout", tensors: edit("conv1.weight", func(x *safetensors.Tensor) bool { x.Shape = []int{64, 7, 7, 3}; return true }),
			sentinel: nn.ErrWeights, want: `"conv1.weight" has shape [64 7 7 3], the config wants [64 3 7 7]`},
		{name: "float weight", tensors: edit("layer4.1.conv2.weight", func(x *safetensors.Tensor) bool {
			*x = f32Tensor(x.Name, make([]float32, len(x.Data)), x.Shape...)
			return true
		}), sentinel: nn.ErrWeights, want: `"layer4.1.conv2.weight" has dtype F32; want I8`},
		{name: "float stem", tensors: edit("conv1.weight", func(x *safetensors.Tensor) bool {
			*x = f32Tensor(x.Name, make([]float32, len(x.Data)), x.Shape...)
			return true
		}), sentinel: nn.ErrWeights, want: `"conv1.weight" has dtype F32; want I8`},
		{name: "zero scale", tensors: edit("layer2.1.conv1.weight_scale", setF32(3, 0)),
			sentinel: nn.ErrWeights, want: "layer2.1.conv1.weight_scale[3] = 0, want a finite positive scale"},
		{name: "nan input scale", tensors: edit("fc.input_scale", setF32(0, float32(math.NaN()))),
			sentinel: nn.ErrWeights, want: "fc.input_scale[0] = NaN, want a finite positive scale"},
		{name: "negative input scale", tensors: edit("layer1.1.conv2.input_scale", setF32(0, -1)),
			sentinel: nn.ErrWeights, want: "layer1.1.conv2.input_scale[0] = -1"},
		{name: "infinite bias", tensors: edit("layer3.0.downsample.0.bias", setF32(7, float32(math.Inf(1)))),
			sentinel: nn.ErrWeights, want: "layer3.0.downsample.0.bias[7] = +Inf, want a finite bias"},
		{name: "projection scale", tensors: edit("layer2.0.downsample.0.input_scale", setF32(0, 1.01*scaleOf("layer2.0.conv1.input_scale"))),
			sentinel: nn.ErrWeights, want: "layer2.0.downsample.0.input_scale = "},
		{name: "batchnorm", tensors: append(slices.Clone(good), extra),
			sentinel: nn.ErrWeights, want: `tensor "bn1.weight" is not used`},
		{name: "deeper config", tensors: good, cfg: "resnet34", sentinel: nn.ErrWeights, want: `missing tensor "layer1.2.conv1.weight"`},
		{name: "unfolded", tensors: good, opts: Options{Unfolded: true}, sentinel: kernels.ErrUnsupported, want: "Options.Unfolded"},
		{name: "no quant", tensors: good, be: noQuant{be, be}, sentinel: kernels.ErrUnsupported, want: "no Quant ops (kernels.Quant)"},
		{name: "no quant conv", tensors: good, be: noQuantConv{be, be, be}, sentinel: kernels.ErrUnsupported,
			want: "no QuantConv ops (kernels.QuantConv)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ck := openTensors(t, c.tensors)
			require.True(t, IsQuantized(ck))
			lc := cfg
			if c.cfg != "" {
				lc, err = ByName(c.cfg)
				require.NoError(t, err)
				lc.NumClasses = cfg.NumClasses
			}
			lbe := c.be
			if lbe == nil {
				lbe = be
			}
			_, err = Load(lbe, lc, ck, c.opts)
			require.ErrorIs(t, err, c.sentinel)
			require.ErrorContains(t, err, c.want)
		})
	}
	t.Run("projection message", func(t *testing.T) {
		ck := openTensors(t, edit("layer2.0.downsample.0.input_scale", setF32(0, 2*scaleOf("layer2.0.conv1.input_scale"))))
		_, err := Load(be, cfg, ck, Options{})
		require.ErrorContains(t, err, fmt.Sprintf("layer2.0.conv1.input_scale = %v", scaleOf("layer2.0.conv1.input_scale")))
		require.ErrorContains(t, err, "needs its scale")
	})
	t.Run("from checkpoint", func(t *testing.T) {
		_, err := FromCheckpoint("resnet50", openTensors(t, good))
		require.ErrorContains(t, err, "fc.weight has shape [10 512], want [classes 2048] for resnet50")
	})
	t.Run("float model", func(t *testing.T) {
		f, err := Load(be, cfg, Synthetic(cfg, 5), Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, f.Close()) }()
		_, err = f.QuantizedTensors()
		require.ErrorIs(t, err, kernels.ErrValue)
		require.ErrorContains(t, err, "not quantized")
	})
	t.Run("float checkpoint", func(t *testing.T) {
		for _, ts := range [][]safetensors.Tensor{
			{f32Tensor("conv1.weight", make([]float32, 64*3*7*7), 64, 3, 7, 7)},
			{f32Tensor("fc.weight", make([]float32, 10*512), 10, 512)},
		} {
			require.False(t, IsQuantized(openTensors(t, ts)))
		}
		ts := []safetensors.Tensor{f32Tensor("conv1.weight", make([]float32, 64*3*7*7), 64, 3, 7, 7), f32Tensor("conv1.weight_scale", make([]float32, 64), 64, 1)}
		require.True(t, IsQuantized(openTensors(t, ts)), "a weight_scale is a quantized checkpoint's")
	})
}

func TestQuantSpec(t *testing.T) {
	data, err := json.Marshal(quant.NewConfig(QuantSpec("percentile")))
	require.NoError(t, err)
	s, err := quant.ParseConfig("config.json", data)
	require.NoError(t, err)
	require.NoError(t, CheckQuantSpec(s))
	ok := QuantSpec("")
	for _, c := range []struct {
		name string
		edit func(*quant.Spec)
		want string
	}{
		{"dynamic", func(s *quant.Spec) { s.Dynamic = true }, "dynamic input scales"},
		{"weight-only", func(s *quant.Spec) { s.Scheme = quant.W8A16 }, "quantization_config is w8a16"},
		{"linear only", func(s *quant.Spec) { s.Targets = nil }, `targets ["Linear"]`},
		{"ignore", func(s *quant.Spec) { s.Ignore = []string{"fc"} }, `ignores ["fc"]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := ok
			s.Targets = quant.ConvTargets()
			c.edit(&s)
			err := CheckQuantSpec(s)
			require.ErrorIs(t, err, kernels.ErrUnsupported)
			require.ErrorContains(t, err, c.want)
		})
	}
}
