package lora_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/lora"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

// layers is the tiny Llama's number of decoder layers.
const layers = 2

// trained is an adapter of the tiny Llama with A and B both non-zero, as
// after training.
func trained(t testing.TB, targets ...string) *lora.Adapter {
	c := lora.Config{R: 4, Alpha: 8, Dropout: 0.05, Targets: targets, BaseModel: "tiny"}
	a, err := lora.New(c, c.TargetsOf(layers, dims), nn.Synthetic(3, func(string) (float64, float64) { return 0, 0.5 }))
	require.NoError(t, err)
	return a
}

func TestNew(t *testing.T) {
	c := lora.Default()
	ts := c.TargetsOf(layers, dims)
	a, err := lora.New(c, ts, lora.Init(1))
	require.NoError(t, err)
	assert.Equal(t, ts, a.Targets)
	assert.Len(t, a.Tensors, 2*len(ts))
	for _, p := range a.Params() {
		want, err := lora.Init(1).Values(p)
		require.NoError(t, err)
		assert.Equal(t, want, a.Tensors[p.Name], p.Name)
	}

	_, err = lora.New(lora.Config{}, ts, lora.Init(1))
	require.ErrorIs(t, err, lora.ErrConfig)
	_, err = lora.New(c, ts, trained(t, "k_proj").Source())
	require.ErrorIs(t, err, nn.ErrWeights, "the source's error")
	assert.Contains(t, err.Error(), ts[0].AName())
}

func TestSaveLoad(t *testing.T) {
	for _, targets := range [][]string{{"q_proj", "v_proj"}, lora.Modules, {"down_proj"}} {
		t.Run(targets[0], func(t *testing.T) {
			a := trained(t, targets...)
			dir := filepath.Join(t.TempDir(), "new", "adapter")
			require.NoError(t, a.Save(dir))

			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
				info, err := e.Info()
				require.NoError(t, err)
				assert.Equal(t, os.FileMode(0o644), info.Mode().Perm(), e.Name())
			}
			assert.Equal(t, []string{lora.ConfigFile, lora.WeightsFile}, names, "no temporary files left")

			f, err := safetensors.Open(filepath.Join(dir, lora.WeightsFile))
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"format": "pt"}, f.Metadata())
			assert.Len(t, f.Tensors(), len(a.Tensors))
			for _, p := range a.Params() {
				tensor, err := f.Tensor(p.Name)
				require.NoError(t, err)
				assert.Equal(t, "F32", tensor.DType)
				assert.Equal(t, p.Shape, tensor.Shape)
			}

			b, err := lora.Load(dir, layers, dims)
			require.NoError(t, err)
			assert.Equal(t, a.Config, b.Config)
			assert.Equal(t, a.Targets, b.Targets)
			require.Equal(t, len(a.Tensors), len(b.Tensors))
			for name, v := range a.Tensors {
				w := b.Tensors[name]
				require.Len(t, w, len(v), name)
				for i := range v {
					require.Equal(t, math.Float32bits(v[i]), math.Float32bits(w[i]), "%s[%d] bit-exact", name, i)
				}
			}

			// Saving again replaces the files.
			a.Config.Alpha = 2
			require.NoError(t, a.Save(dir))
			b, err = lora.Load(dir, layers, dims)
			require.NoError(t, err)
			assert.Equal(t, 2.0, b.Config.Alpha)
		})
	}
}

// writeAdapter writes an adapter directory holding config and tensors
// (F32 unless dtype says otherwise), and returns it.
func writeAdapter(t *testing.T, config []byte, tensors map[string][]float32, shapes map[string][]int, dtype kernels.DType) string {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, lora.ConfigFile), config, 0o644))
	name, err := safetensors.DTypeName(dtype)
	require.NoError(t, err)
	var ts []safetensors.Tensor
	for n, v := range tensors {
		data := make([]byte, len(v)*dtype.Size())
		require.NoError(t, kernels.EncodeFloat32(dtype, data, v))
		ts = append(ts, safetensors.Tensor{Name: n, DType: name, Shape: shapes[n], Data: data})
	}
	f, err := os.Create(filepath.Join(dir, lora.WeightsFile))
	require.NoError(t, err)
	require.NoError(t, safetensors.Write(f, ts, map[string]string{"format": "pt"}))
	require.NoError(t, f.Close())
	return dir
}

// shapesOf returns the shapes of a's parameters by name.
func shapesOf(a *lora.Adapter) map[string][]int {
	m := map[string][]int{}
	for _, p := range a.Params() {
		m[p.Name] = p.Shape
	}
	return m
}

func TestLoadHalf(t *testing.T) {
	a := trained(t, "q_proj", "v_proj")
	cfg, err := a.Config.Marshal()
	require.NoError(t, err)
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
		dir := writeAdapter(t, cfg, a.Tensors, shapesOf(a), dt)
		b, err := lora.Load(dir, layers, dims)
		require.NoError(t, err, "%v", dt)
		for name, v := range a.Tensors {
			enc := make([]byte, len(v)*dt.Size())
			require.NoError(t, kernels.EncodeFloat32(dt, enc, v))
			want := make([]float32, len(v))
			require.NoError(t, kernels.DecodeFloat32(dt, want, enc))
			assert.Equal(t, want, b.Tensors[name], "%v %s", dt, name)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	a := trained(t, "q_proj", "v_proj")
	cfg, err := a.Config.Marshal()
	require.NoError(t, err)
	first := a.Targets[0]
	last := a.Targets[len(a.Targets)-1]
	k := lora.Target{Layer: 0, Module: "k_proj", In: hidden, Out: kvDim}
	beyond := lora.Target{Layer: layers, Module: "q_proj", In: hidden, Out: hidden}

	for _, tc := range []struct {
		name   string
		edit   func(tensors map[string][]float32, shapes map[string][]int)
		dtype  kernels.DType
		tensor string // named in the message
		want   string
	}{
		{"missing A", func(ts map[string][]float32, _ map[string][]int) { delete(ts, first.AName()) },
			kernels.F32, first.AName(), "missing tensor"},
		{"missing B", func(ts map[string][]float32, _ map[string][]int) { delete(ts, last.BName()) },
			kernels.F32, last.BName(), "missing tensor"},
		{"extra module", func(ts map[string][]float32, sh map[string][]int) {
			ts[k.AName()], sh[k.AName()] = make([]float32, 4*hidden), k.AShape(4)
		}, kernels.F32, k.AName(), "not one of adapter_config.json's targets (q_proj, v_proj)"},
		{"extra tensor", func(ts map[string][]float32, sh map[string][]int) {
			ts["lm_head.weight"], sh["lm_head.weight"] = []float32{1}, []int{1}
		}, kernels.F32, "lm_head.weight", "not one of"},
		{"layer beyond the model", func(ts map[string][]float32, sh map[string][]int) {
			ts[beyond.BName()], sh[beyond.BName()] = make([]float32, 4*hidden), beyond.BShape(4)
		}, kernels.F32, beyond.BName(), "of layer 2, the model has 2 layers"},
		{"rank", func(ts map[string][]float32, sh map[string][]int) {
			ts[first.AName()], sh[first.AName()] = make([]float32, 8*hidden), first.AShape(8)
		}, kernels.F32, first.AName(), "has shape [8 16], want [4 16]"},
		{"transposed", func(_ map[string][]float32, sh map[string][]int) {
			sh[last.BName()] = []int{4, kvDim}
		}, kernels.F32, last.BName(), "has shape [4 8], want [8 4]"},
		{"integers", func(map[string][]float32, map[string][]int) {}, kernels.I32, first.AName(), "dtype I32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tensors, shapes := map[string][]float32{}, shapesOf(a)
			for n, v := range a.Tensors {
				tensors[n] = v
			}
			tc.edit(tensors, shapes)
			dir := writeAdapter(t, cfg, tensors, shapes, tc.dtype)
			_, err := lora.Load(dir, layers, dims)
			require.ErrorIs(t, err, nn.ErrWeights)
			assert.Contains(t, err.Error(), filepath.Join(dir, lora.WeightsFile))
			assert.Contains(t, err.Error(), `"`+tc.tensor+`"`)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	t.Run("fewer layers than the adapter", func(t *testing.T) {
		dir := writeAdapter(t, cfg, a.Tensors, shapesOf(a), kernels.F32)
		_, err := lora.Load(dir, 1, dims)
		require.ErrorIs(t, err, nn.ErrWeights)
		assert.Contains(t, err.Error(), "of layer 1, the model has 1 layers")
	})
	t.Run("more layers than the adapter", func(t *testing.T) {
		dir := writeAdapter(t, cfg, a.Tensors, shapesOf(a), kernels.F32)
		_, err := lora.Load(dir, 3, dims)
		require.ErrorIs(t, err, nn.ErrWeights)
		assert.Contains(t, err.Error(), `missing tensor "base_model.model.model.layers.2.self_attn.q_proj.lora_A.weight"`)
	})
	t.Run("other model sizes", func(t *testing.T) {
		dir := writeAdapter(t, cfg, a.Tensors, shapesOf(a), kernels.F32)
		_, err := lora.Load(dir, layers, func(string) (int, int) { return 32, 32 })
		require.ErrorIs(t, err, nn.ErrWeights)
		assert.Contains(t, err.Error(), "has shape [4 16], want [4 32]")
	})
	t.Run("unsupported config", func(t *testing.T) {
		dir := writeAdapter(t, withField(t, "use_dora", "true"), a.Tensors, shapesOf(a), kernels.F32)
		_, err := lora.Load(dir, layers, dims)
		require.ErrorIs(t, err, lora.ErrConfig)
		assert.Contains(t, err.Error(), filepath.Join(dir, lora.ConfigFile)+": use_dora = true: not supported")
	})
	t.Run("no weights", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, lora.ConfigFile), cfg, 0o644))
		_, err := lora.Load(dir, layers, dims)
		require.ErrorIs(t, err, os.ErrNotExist)
		assert.Contains(t, err.Error(), lora.WeightsFile)

		require.NoError(t, os.WriteFile(filepath.Join(dir, "adapter_model.bin"), []byte("pickle"), 0o644))
		_, err = lora.Load(dir, layers, dims)
		require.ErrorIs(t, err, nn.ErrWeights)
		assert.Contains(t, err.Error(), "safe_serialization=True")
	})
	t.Run("no config", func(t *testing.T) {
		_, err := lora.Load(t.TempDir(), layers, dims)
		require.ErrorIs(t, err, os.ErrNotExist)
		assert.Contains(t, err.Error(), lora.ConfigFile)
	})
	t.Run("truncated weights", func(t *testing.T) {
		dir := writeAdapter(t, cfg, a.Tensors, shapesOf(a), kernels.F32)
		path := filepath.Join(dir, lora.WeightsFile)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, b[:len(b)-3], 0o644))
		_, err = lora.Load(dir, layers, dims)
		require.ErrorIs(t, err, safetensors.ErrInvalid)
		assert.Contains(t, err.Error(), path)
	})
}

func TestSaveErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(a *lora.Adapter)
		want string
	}{
		{"invalid config", func(a *lora.Adapter) { a.Config.R = 0 }, "r = 0"},
		{"no targets", func(a *lora.Adapter) { a.Targets = nil }, "no targets"},
		{"missing tensor", func(a *lora.Adapter) { delete(a.Tensors, a.Targets[1].BName()) }, a1B},
		{"short tensor", func(a *lora.Adapter) { a.Tensors[a.Targets[1].BName()] = []float32{1} }, a1B},
		{"extra tensor", func(a *lora.Adapter) { a.Tensors["x"] = nil }, `"x"`},
		{"untargeted module", func(a *lora.Adapter) { a.Targets[0].Module = "k_proj" }, "not in target_modules"},
		{"missing layer", func(a *lora.Adapter) { a.Targets = a.Targets[2:] }, "no target for layer 0 self_attn.q_proj"},
		{"missing module", func(a *lora.Adapter) { a.Targets = a.Targets[:3] }, "no target for layer 1 self_attn.v_proj"},
		{"duplicate", func(a *lora.Adapter) { a.Targets[2] = a.Targets[0] }, "twice"},
		{"sizes differ", func(a *lora.Adapter) { a.Targets[2].In++ }, "is 16×17 but"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := trained(t, "q_proj", "v_proj")
			tc.edit(a)
			dir := filepath.Join(t.TempDir(), "out")
			err := a.Save(dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			_, statErr := os.Stat(dir)
			assert.ErrorIs(t, statErr, os.ErrNotExist, "nothing written")
		})
	}
}

// a1B is the name of layer 0's v_proj B, the second target's, of trained.
const a1B = `"base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight"`

func TestSource(t *testing.T) {
	a := trained(t, "q_proj", "v_proj")
	src := a.Source()
	for _, p := range a.Params() {
		v, err := src.Values(p)
		require.NoError(t, err)
		assert.Equal(t, a.Tensors[p.Name], v)
		v[0]++
		assert.NotEqual(t, a.Tensors[p.Name][0], v[0], "a copy")
	}
	p := a.Params()[0]
	for _, bad := range []nn.Param{
		{Name: p.Name, Shape: []int{p.Shape[1], p.Shape[0]}},
		{Name: "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight", Shape: p.Shape},
	} {
		_, err := src.Values(bad)
		require.ErrorIs(t, err, nn.ErrWeights)
		assert.Contains(t, err.Error(), bad.Name)
	}

	// Into device tensors and optimizer state, as training loads them.
	be := cpu.New()
	set := nn.NewTensorSet(be)
	defer func() { require.NoError(t, set.Free()) }()
	require.NoError(t, nn.LoadParams(set, src, a.Params(), kernels.F32))
	for _, p := range a.Params() {
		v, err := kernels.ToFloat32(set.Get(p.Name))
		require.NoError(t, err)
		assert.Equal(t, a.Tensors[p.Name], v)
	}
	st, err := nn.NewTrainState(be, src, a.Params())
	require.NoError(t, err)
	require.NoError(t, st.Free())
}

func TestMerge(t *testing.T) {
	for _, rslora := range []bool{false, true} {
		a := trained(t, "q_proj", "down_proj")
		a.Config.RSLoRA = rslora
		base := nn.Synthetic(9, func(string) (float64, float64) { return 0, 0.05 })
		for _, tg := range a.Targets {
			w, err := base.Values(nn.Param{Name: tg.BaseName(), Shape: []int{tg.Out, tg.In}})
			require.NoError(t, err)
			want := make([]float32, len(w))
			A, B, r := a.Tensors[tg.AName()], a.Tensors[tg.BName()], a.Config.R
			scale := a.Config.Alpha / float64(r)
			if rslora {
				scale = a.Config.Alpha / math.Sqrt(float64(r))
			}
			for o := range tg.Out {
				for i := range tg.In {
					var s float64
					for k := range r {
						s += float64(B[o*r+k]) * float64(A[k*tg.In+i])
					}
					exact := float64(w[o*tg.In+i]) + scale*s
					want[o*tg.In+i] = float32(exact)
				}
			}
			require.NoError(t, a.Merge(tg, w))
			assert.Equal(t, want, w, "%v rslora=%v", tg, rslora)
		}
	}

	a := trained(t, "q_proj")
	tg := a.Targets[0]
	w := make([]float32, tg.Out*tg.In)
	for _, tc := range []struct {
		tg   lora.Target
		w    []float32
		want string
	}{
		{tg, w[1:], "model.layers.0.self_attn.q_proj.weight has 255 values"},
		{lora.Target{Layer: 0, Module: "v_proj", In: hidden, Out: kvDim}, w, "layer 0 self_attn.v_proj (8×16) is not a target"},
		{lora.Target{Layer: 0, Module: "q_proj", In: hidden, Out: 8}, w, "is not a target"},
	} {
		err := a.Merge(tc.tg, tc.w)
		require.ErrorIs(t, err, nn.ErrWeights)
		assert.Contains(t, err.Error(), tc.want)
	}
	assert.Equal(t, make([]float32, len(w)), w, "untouched")
}

func TestMerged(t *testing.T) {
	a := trained(t, "v_proj", "up_proj")
	base := nn.Synthetic(9, func(string) (float64, float64) { return 0, 0.05 })
	merged := a.Merged(base)
	for _, tg := range a.Targets {
		p := nn.Param{Name: tg.BaseName(), Shape: []int{tg.Out, tg.In}}
		got, err := merged.Values(p)
		require.NoError(t, err)
		want, err := base.Values(p)
		require.NoError(t, err)
		require.NoError(t, a.Merge(tg, want))
		assert.Equal(t, want, got, tg.BaseName())
	}
	p := nn.Param{Name: "model.layers.0.self_attn.q_proj.weight", Shape: []int{hidden, hidden}}
	got, err := merged.Values(p)
	require.NoError(t, err)
	want, err := base.Values(p)
	require.NoError(t, err)
	assert.Equal(t, want, got, "not a target: passed through")

	_, err = merged.Values(nn.Param{Name: a.Targets[0].BaseName(), Shape: []int{hidden, hidden}})
	require.ErrorIs(t, err, nn.ErrWeights)
	assert.Contains(t, err.Error(), a.Targets[0].BaseName())
}
