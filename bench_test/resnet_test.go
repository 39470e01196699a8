package bench_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/resnet"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/zbench"
)

// resnetGoldenPath holds the ResNet cases of testdata/reference/resnet.py:
// torchvision's own models with the seeded synthetic weights (resnet.Synthetic),
// inputs and float64 logits (and the stages' outputs of two cases).
const resnetGoldenPath = "../testdata/golden/resnet.safetensors"

// resnetSeed is the reference's seed of the synthetic weights.
const resnetSeed = 20261201

// resnetParams are a ResNet case's parameters. StateDict is torchvision's
// state_dict of the model: name, safetensors dtype and shape of each
// entry, in order.
type resnetParams struct {
	Op         string          `json:"op"`
	Model      string          `json:"model"`
	Seed       uint64          `json:"seed"`
	NumClasses int             `json:"num_classes"`
	Batch      int             `json:"batch"`
	Height     int             `json:"height"`
	Width      int             `json:"width"`
	F32RelErr  float64         `json:"f32_rel_err"`
	StateDict  [][3]any        `json:"state_dict"`
	entries    []stateDictItem // StateDict, decoded
}

// stateDictItem is one entry of a torchvision state_dict.
type stateDictItem struct {
	Name, DType string
	Shape       []int
}

// resnetCase is a loaded ResNet golden case.
type resnetCase struct {
	Name   string
	Params resnetParams
	Config resnet.Config
	Pixels []float32        // [N, 3, H, W]
	Logits []float32        // [N, classes]
	Stages map[int]roleData // layer1 … layer4, NCHW, when stored
}

// loadResNetCases reads every case of the golden file.
func loadResNetCases() ([]*resnetCase, error) {
	f, names, err := openGolden(resnetGoldenPath)
	if err != nil {
		return nil, err
	}
	var out []*resnetCase
	for _, name := range names {
		c, err := loadResNetCase(f, name)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// loadResNetCase reads and checks case name: its parameters, its roles
// and their shapes, and that torchvision's state_dict is the one our
// config lists (every float parameter, in order, and a
// num_batches_tracked I64 counter after each BatchNorm).
func loadResNetCase(f *safetensors.File, name string) (*resnetCase, error) {
	fail := func(format string, args ...any) (*resnetCase, error) {
		return nil, fmt.Errorf("resnet golden case %q: %w", name, fmt.Errorf(format, args...))
	}
	c := &resnetCase{Name: name, Stages: map[int]roleData{}}
	if _, _, err := readParams(f, name, &c.Params); err != nil {
		return fail("%w", err)
	}
	p := &c.Params
	if p.Op != "resnet" || p.Seed != resnetSeed {
		return fail("op %q seed %d, want resnet and %d", p.Op, p.Seed, resnetSeed)
	}
	cfg, err := resnet.ByName(p.Model)
	if err != nil {
		return fail("%w", err)
	}
	cfg.NumClasses = p.NumClasses
	c.Config = cfg
	for i, e := range p.StateDict {
		n, _ := e[0].(string)
		dt, _ := e[1].(string)
		raw, _ := e[2].([]any)
		it := stateDictItem{Name: n, DType: dt}
		for _, d := range raw {
			v, ok := d.(float64)
			if !ok {
				return fail("state_dict entry %d (%q) has shape %v", i, n, raw)
			}
			it.Shape = append(it.Shape, int(v))
		}
		p.entries = append(p.entries, it)
	}
	var floats []nn.Param
	for _, e := range p.entries {
		if strings.HasSuffix(e.Name, ".num_batches_tracked") {
			if e.DType != "I64" || len(e.Shape) != 0 {
				return fail("%s is %s %v, want an I64 scalar", e.Name, e.DType, e.Shape)
			}
			continue
		}
		if e.DType != "F32" {
			return fail("%s is %s, want F32", e.Name, e.DType)
		}
		floats = append(floats, nn.Param{Name: e.Name, Shape: e.Shape})
	}
	if want := cfg.Params(); !slices.EqualFunc(floats, want, func(a, b nn.Param) bool {
		return a.Name == b.Name && slices.Equal(a.Shape, b.Shape)
	}) {
		return fail("torchvision's state_dict of %s (%d float tensors) is not the config's %d parameters", p.Model, len(floats), len(want))
	}
	if err := checkRoles(f, name, "resnet", []string{"pixel_values", "logits", "layer1", "layer2", "layer3", "layer4"}); err != nil {
		return fail("%w", err)
	}
	px, err := readRole(f, name, "pixel_values", kernels.F32)
	if err != nil {
		return fail("%w", err)
	}
	lg, err := readRole(f, name, "logits", kernels.F32)
	if err != nil {
		return fail("%w", err)
	}
	if !px.Shape.Equal(kernels.Shape{p.Batch, 3, p.Height, p.Width}) || !lg.Shape.Equal(kernels.Shape{p.Batch, p.NumClasses}) {
		return fail("pixel_values %v and logits %v, want [%d 3 %d %d] and [%d %d]",
			px.Shape, lg.Shape, p.Batch, p.Height, p.Width, p.Batch, p.NumClasses)
	}
	c.Pixels, c.Logits = px.F32, lg.F32
	for s := 1; s <= 4; s++ {
		role := fmt.Sprintf("layer%d", s)
		if !slices.Contains(f.Tensors(), name+"/"+role) {
			continue
		}
		if c.Stages[s], err = readRole(f, name, role, kernels.F32); err != nil {
			return fail("%w", err)
		}
	}
	return c, nil
}

// writeTorchvisionCheckpoint writes the case's state_dict as a torchvision
// user's safetensors file would hold it (every entry, names, order and
// dtypes as torchvision's, num_batches_tracked zero) with the synthetic
// weights, and returns its path.
func writeTorchvisionCheckpoint(t *testing.T, c *resnetCase) string {
	t.Helper()
	src := resnet.Synthetic(c.Config, resnetSeed)
	var ts []safetensors.Tensor
	for _, e := range c.Params.entries {
		if e.DType == "I64" {
			ts = append(ts, safetensors.Tensor{Name: e.Name, DType: "I64", Shape: []int{}, Data: make([]byte, 8)})
			continue
		}
		v, err := src.Values(nn.Param{Name: e.Name, Shape: e.Shape})
		require.NoError(t, err)
		data := make([]byte, 4*len(v))
		require.NoError(t, kernels.EncodeFloat32(kernels.F32, data, v))
		ts = append(ts, safetensors.Tensor{Name: e.Name, DType: "F32", Shape: e.Shape, Data: data})
	}
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, ts, map[string]string{"format": "pt"}))
	path := filepath.Join(t.TempDir(), c.Params.Model+".safetensors")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// resnetPrecision is a precision a ResNet runs in on a device.
type resnetPrecision struct {
	name string // the benchmark's dtype
	opts resnet.Options
}

var resnetPrecisions = []resnetPrecision{
	{"f32", resnet.Options{Precision: nn.F32}},
	{"tf32", resnet.Options{Precision: nn.F32, TF32: true}},
	{"f16", resnet.Options{Precision: nn.F16}},
	{"bf16", resnet.Options{Precision: nn.BF16}},
}

// resnetTolerance is the rel-err of logits a model must reach in a dtype:
// 1e-4 in f32 (torchvision's f32 model itself is within 2e-6 of the
// float64 reference), benchTolerance otherwise, so that the benchmarks
// (which report it to zbench compare's gate) and these tests agree.
func resnetTolerance(model, dtype string) float64 {
	if dtype == "f32" {
		return 1e-4
	}
	return benchTolerance("BenchmarkResNet/model="+model, dtype)
}

// resnetRelErr runs the case's input through m and returns the rel-err
// of the logits.
func resnetRelErr(m *resnet.Model, c *resnetCase) (float64, error) {
	f, err := m.NewForward(c.Params.Batch, c.Params.Height, c.Params.Width)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.SetPixels(c.Pixels); err != nil {
		return 0, err
	}
	if err := f.Run(); err != nil {
		return 0, err
	}
	got, err := f.Logits()
	if err != nil {
		return 0, err
	}
	rel, _ := kernels.RelErr(widen(got), widen(c.Logits))
	return rel, nil
}

// TestResNetGolden runs every case on every device that has the vision
// ops: f32 (all cases; from a torchvision-layout checkpoint file for the
// resnet18 ones), the unfolded BatchNorm path and each stage's output
// where the case stores them, and the 16-bit precisions (every case on
// GPUs, resnet18_40x56 and resnet50_32 on the CPU).
func TestResNetGolden(t *testing.T) {
	cases, err := loadResNetCases()
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	devs := visionDevices()
	require.NotEmpty(t, devs, "no device implements kernels.Vision")
	for _, dev := range devs {
		gpu := dev.Info().Kind == kernels.GPU
		for _, c := range cases {
			if testing.Short() && c.Params.Height*c.Params.Width > 64*64 && !gpu {
				continue
			}
			for _, pr := range resnetPrecisions {
				if pr.name != "f32" && !gpu && c.Name != "resnet18_40x56" && c.Name != "resnet50_32" {
					continue
				}
				if pr.opts.TF32 && !gpu {
					continue // the CPU computes TF32 requests in full f32: nothing new
				}
				t.Run(fmt.Sprintf("dev=%s/%s/%s", dev.Name(), c.Name, pr.name), func(t *testing.T) {
					var src nn.Source = resnet.Synthetic(c.Config, resnetSeed)
					if strings.HasPrefix(c.Name, "resnet18") && pr.name == "f32" {
						ck, err := resnet.OpenCheckpoint(writeTorchvisionCheckpoint(t, c))
						require.NoError(t, err)
						cfg, err := resnet.FromCheckpoint(c.Params.Model, ck)
						require.NoError(t, err)
						require.Equal(t, c.Config, cfg, "the config the checkpoint gives")
						src = ck
					}
					m, err := resnet.Load(dev, c.Config, src, pr.opts)
					require.NoError(t, err)
					defer func() { require.NoError(t, m.Close()) }()
					rel, err := resnetRelErr(m, c)
					require.NoError(t, err)
					tol := resnetTolerance(c.Params.Model, pr.name)
					t.Logf("rel-err logits %.3g (torchvision's own f32: %.2g)", rel, c.Params.F32RelErr)
					assert.LessOrEqual(t, rel, tol)
					if pr.name == "f32" && len(c.Stages) > 0 {
						requireStages(t, m, c)
					}
				})
			}
			if len(c.Stages) > 0 {
				t.Run(fmt.Sprintf("dev=%s/%s/unfolded", dev.Name(), c.Name), func(t *testing.T) {
					m, err := resnet.Load(dev, c.Config, resnet.Synthetic(c.Config, resnetSeed), resnet.Options{Unfolded: true})
					require.NoError(t, err)
					defer func() { require.NoError(t, m.Close()) }()
					rel, err := resnetRelErr(m, c)
					require.NoError(t, err)
					t.Logf("rel-err logits %.3g, BatchNorm as its own op", rel)
					assert.LessOrEqual(t, rel, 1e-4)
				})
			}
		}
	}
}

// requireStages checks the outputs of layer1 … layer4 against the
// reference's.
func requireStages(t *testing.T, m *resnet.Model, c *resnetCase) {
	t.Helper()
	f, err := m.NewForward(c.Params.Batch, c.Params.Height, c.Params.Width)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.SetPixels(c.Pixels))
	for s := 1; s <= 4; s++ {
		want, ok := c.Stages[s]
		require.True(t, ok, "layer%d", s)
		got, shape, err := f.Stage(s)
		require.NoError(t, err)
		require.Equal(t, []int(want.Shape), shape, "layer%d", s)
		rel, maxAbs := kernels.RelErr(widen(got), widen(want.F32))
		assert.LessOrEqualf(t, rel, 1e-4, "layer%d: rel-err %.3g, max-abs %.3g", s, rel, maxAbs)
	}
}

// TestResNetGoldenFile checks that the file covers every member of the
// family torchvision 0.14 builds by these names, a non-ImageNet head and
// ResNet-50 at 224×224.
func TestResNetGoldenFile(t *testing.T) {
	cases, err := loadResNetCases()
	require.NoError(t, err)
	models := map[string]bool{}
	var cifar, full bool
	for _, c := range cases {
		models[c.Params.Model] = true
		cifar = cifar || c.Params.NumClasses != 1000
		full = full || (c.Params.Model == "resnet50" && c.Params.Height == 224 && c.Params.Width == 224)
		assert.LessOrEqual(t, c.Params.F32RelErr, 1e-5, "%s: torchvision's own f32", c.Name)
	}
	for _, n := range []string{"resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "wide_resnet50_2"} {
		assert.True(t, models[n], "no golden case of %s", n)
	}
	assert.True(t, cifar, "no case with a 10-class head")
	assert.True(t, full, "no ResNet-50 case at 224×224")
}

// resnetBatches are BenchmarkResNet's batch sizes on dev: the sweep of
// batch 1 to 512 on GPUs, 1 and 8 on CPUs, batch 1 in -short mode.
func resnetBatches(dev kernels.Backend) []int {
	switch {
	case testing.Short():
		return []int{1}
	case dev.Info().Kind == kernels.GPU:
		return []int{1, 4, 8, 16, 32, 64, 128, 256, 512}
	}
	return []int{1, 8}
}

// resnetBenchPrecisions are the dtypes BenchmarkResNet runs on dev: every
// one on GPUs, f32 on CPUs (no 16-bit arithmetic there).
func resnetBenchPrecisions(dev kernels.Backend) []resnetPrecision {
	if dev.Info().Kind == kernels.GPU && !testing.Short() {
		return resnetPrecisions
	}
	return resnetPrecisions[:1]
}

// BenchmarkResNet is ResNet-50 inference (torchvision's resnet50, BatchNorm
// folded, seeded synthetic weights) on 224×224 images: one op is a batch,
// img/s is batch over its time, %peak the share of the device's peak
// FLOP/s, peak-B the device memory in use at the high-water mark. rel-err
// is the logits of the same model on the golden case resnet50_224 against
// torchvision's float64 output. On GPUs the whole pass is a captured graph.
// dtype=int8 is the W8A8 static model (benchResNetInt8) on devices that run
// it.
func BenchmarkResNet(b *testing.B) {
	cases, err := loadResNetCases()
	if err != nil {
		b.Fatal(err)
	}
	var golden *resnetCase
	for _, c := range cases {
		if c.Name == "resnet50_224" {
			golden = c
		}
	}
	if golden == nil {
		b.Fatalf("%s: no resnet50_224 case", resnetGoldenPath)
	}
	cfg := golden.Config
	for _, dev := range visionDevices() {
		for _, pr := range resnetBenchPrecisions(dev) {
			var m *resnet.Model
			verify := sync.OnceValues(func() (float64, error) { return resnetRelErr(m, golden) })
			for _, batch := range resnetBatches(dev) {
				b.Run(fmt.Sprintf("dev=%s/model=%s/dtype=%s/batch=%d", dev.Name(), cfg.Name, pr.name, batch), func(b *testing.B) {
					if m == nil {
						if m, err = resnet.Load(dev, cfg, resnet.Synthetic(cfg, resnetSeed), pr.opts); err != nil {
							b.Fatal(err)
						}
					}
					resnetBench(b, m, batch, verify, resnetTolerance(cfg.Name, pr.name))
				})
			}
			if m != nil {
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
			}
		}
		if runsInt8(dev) {
			benchResNetInt8(b, dev, golden)
		}
	}
}

func resnetBench(b *testing.B, m *resnet.Model, batch int, verify func() (float64, error), tol float64) {
	const size = 224
	dev := m.Backend()
	f, err := m.NewForward(batch, size, size)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.SetPixels(uniform(uint64(batch), kernels.F32, batch*3*size*size)); err != nil {
		b.Fatal(err)
	}
	run := captured(b, dev, f.Run)
	dt := m.Options.Precision.DType()
	if m.Quantized() {
		dt = kernels.I8
	}
	work := zbench.Workload{
		FLOPs:      m.Config.FLOPs(batch, size, size),
		LeastFLOPs: m.Config.LeastFLOPs(batch, size, size),
		Bytes:      float64(m.WeightBytes()) + float64(batch*3*size*size*4),
		DType:      dt,
		Items:      float64(batch),
		ItemUnit:   "img/s",
	}
	zbench.Measure(b, zbench.Bench{Dev: dev, Work: work, Op: run, Verify: verify, MaxRelErr: tol})
}
