package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/zbench"
)

// bertTiny holds the tiny checkpoint, inputs and outputs written by
// testdata/reference/bert.py.
const bertTiny = "../../testdata/golden/bert-tiny"

var (
	tinyWeights = filepath.Join(bertTiny, "model.safetensors")
	tinyConfig  = filepath.Join(bertTiny, "config.json")
	tinyInput   = filepath.Join(bertTiny, "input.safetensors")
	tinyOutput  = filepath.Join(bertTiny, "output.safetensors")
)

// inferFlags are the flags of one infer run; empty ones are left out.
type inferFlags struct {
	model, weights, config, input, output, device, dtype string
}

func (f inferFlags) args() []string {
	args := []string{"infer"}
	for _, kv := range [][2]string{
		{"model", f.model}, {"weights", f.weights}, {"config", f.config}, {"input", f.input},
		{"output", f.output}, {"device", f.device}, {"dtype", f.dtype},
	} {
		if kv[1] != "" {
			args = append(args, "--"+kv[0], kv[1])
		}
	}
	return args
}

// tinyFlags runs bert-tiny on cpu in f32, writing out.safetensors in a new
// temporary directory.
func tinyFlags(t *testing.T) inferFlags {
	return inferFlags{
		model: "bert", weights: tinyWeights, config: tinyConfig, input: tinyInput,
		output: filepath.Join(t.TempDir(), "out.safetensors"), device: "cpu", dtype: "f32",
	}
}

// tensors reads every tensor of a safetensors file, in name order.
func tensors(t *testing.T, path string) (*safetensors.File, []safetensors.Tensor) {
	t.Helper()
	f, err := safetensors.Open(path)
	require.NoError(t, err)
	var ts []safetensors.Tensor
	for _, n := range f.Tensors() {
		x, err := f.Tensor(n)
		require.NoError(t, err)
		ts = append(ts, x)
	}
	return f, ts
}

// rewrite writes a copy of the safetensors file src, changed by edit, to a
// new temporary directory and returns its path.
func rewrite(t *testing.T, src string, edit func([]safetensors.Tensor) []safetensors.Tensor) string {
	t.Helper()
	f, ts := tensors(t, src)
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, edit(ts), f.Metadata()))
	return writeFile(t, t.TempDir(), filepath.Base(src), buf.Bytes())
}

// editBytes writes a copy of the file src, changed by edit, to a new
// temporary directory and returns its path.
func editBytes(t *testing.T, src string, edit func([]byte) []byte) string {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	return writeFile(t, t.TempDir(), filepath.Base(src), edit(b))
}

// tinyConfigWith writes bert-tiny's config.json with key set to v.
func tinyConfigWith(t *testing.T, key string, v any) string {
	t.Helper()
	return editBytes(t, tinyConfig, func(b []byte) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		m[key] = v
		out, err := json.Marshal(m)
		require.NoError(t, err)
		return out
	})
}

func i32Tensor(name string, vals []int32, shape ...int) safetensors.Tensor {
	b := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return safetensors.Tensor{Name: name, DType: "I32", Shape: shape, Data: b}
}

func i64Tensor(name string, vals []int64, shape ...int) safetensors.Tensor {
	b := make([]byte, 0, 8*len(vals))
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return safetensors.Tensor{Name: name, DType: "I64", Shape: shape, Data: b}
}

// toI32 converts every tensor to I32.
func toI32(t *testing.T) func([]safetensors.Tensor) []safetensors.Tensor {
	return func(ts []safetensors.Tensor) []safetensors.Tensor {
		for i, x := range ts {
			v, err := x.Int32()
			require.NoError(t, err)
			ts[i] = i32Tensor(x.Name, v, x.Shape...)
		}
		return ts
	}
}

// replace replaces the named tensor with fn's result, or drops it when fn
// returns a tensor without a name.
func replace(t *testing.T, name string, fn func(safetensors.Tensor) safetensors.Tensor) func([]safetensors.Tensor) []safetensors.Tensor {
	return func(ts []safetensors.Tensor) []safetensors.Tensor {
		i := slices.IndexFunc(ts, func(x safetensors.Tensor) bool { return x.Name == name })
		require.GreaterOrEqual(t, i, 0, "no tensor %q", name)
		if x := fn(ts[i]); x.Name != "" {
			ts[i] = x
			return ts
		}
		return slices.Delete(ts, i, i+1)
	}
}

func float64s(t *testing.T, x safetensors.Tensor) []float64 {
	t.Helper()
	v, err := x.Float32()
	require.NoError(t, err)
	out := make([]float64, len(v))
	for i, f := range v {
		out[i] = float64(f)
	}
	return out
}

// TestInferBERTGolden runs bert-tiny on every device of this binary and
// compares the outputs with the PyTorch reference's.
func TestInferBERTGolden(t *testing.T) {
	_, want := tensors(t, tinyOutput)
	require.Len(t, want, 2)
	inputI32 := rewrite(t, tinyInput, toI32(t))
	devs, err := zbench.Devices()
	require.NoError(t, err)
	for _, dev := range devs {
		for _, tc := range []struct {
			name, dtype, input string
			tol                float64
		}{
			{"f32", "f32", tinyInput, 1e-4},
			{"f32 I32 input", "f32", inputI32, 1e-4},
			{"bf16", "bf16", tinyInput, 1e-2},
			{"f16", "f16", tinyInput, 1e-2},
			{"mixed", "mixed", tinyInput, 1e-2},
		} {
			t.Run(dev.Name()+"/"+tc.name, func(t *testing.T) {
				fl := tinyFlags(t)
				fl.device, fl.dtype, fl.input = dev.Name(), tc.dtype, tc.input
				var stdout, stderr bytes.Buffer
				require.NoError(t, run(fl.args(), &stdout, &stderr))
				assert.Empty(t, stderr.String())
				for _, s := range []string{"bert", dev.Name(), tc.dtype, "3×11", fl.output, "elapsed"} {
					assert.Contains(t, stdout.String(), s)
				}
				f, got := tensors(t, fl.output)
				require.Len(t, got, len(want))
				for i, w := range want {
					g := got[i]
					require.Equal(t, w.Name, g.Name)
					assert.Equal(t, "F32", g.DType, w.Name)
					require.Equal(t, w.Shape, g.Shape, w.Name)
					rel, maxAbs := kernels.RelErr(float64s(t, g), float64s(t, w))
					t.Logf("%s: rel-err %.3g, max-abs %.3g", w.Name, rel, maxAbs)
					assert.LessOrEqual(t, rel, tc.tol, w.Name)
				}
				assert.Equal(t, map[string]string{
					"format": "zbench infer output", "model": "bert", "device": dev.Name(), "dtype": tc.dtype,
					"weights": "model.safetensors", "config": "config.json", "input": "input.safetensors",
					"device_name": dev.Info().Name,
				}, f.Metadata())
				assert.Equal(t, []string{"out.safetensors"}, dirNames(t, filepath.Dir(fl.output)), "no temporary file is left")
			})
		}
	}
}

// TestInferBERTOptionalInputs checks that leaving out attention_mask and
// token_type_ids means no padding and all-zero types, as in Hugging Face.
func TestInferBERTOptionalInputs(t *testing.T) {
	ids := i64Tensor("input_ids", []int64{2, 7, 11, 5, 3, 9, 40, 1}, 2, 4)
	explicit := writeTensors(t, ids,
		i64Tensor("attention_mask", []int64{1, 1, 1, 1, 1, 1, 1, 1}, 2, 4),
		i64Tensor("token_type_ids", make([]int64, 8), 2, 4))
	implicit := writeTensors(t, ids)
	var outs [][]safetensors.Tensor
	for _, in := range []string{explicit, implicit} {
		fl := tinyFlags(t)
		fl.input = in
		var stdout, stderr bytes.Buffer
		require.NoError(t, run(fl.args(), &stdout, &stderr))
		_, ts := tensors(t, fl.output)
		outs = append(outs, ts)
	}
	assert.Equal(t, outs[0], outs[1])
}

// writeTensors writes an input file holding ts and returns its path.
func writeTensors(t *testing.T, ts ...safetensors.Tensor) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, ts, nil))
	return writeFile(t, t.TempDir(), "input.safetensors", buf.Bytes())
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestInferErrors(t *testing.T) {
	hasCUDA := false
	devs, _ := zbench.Devices()
	for _, d := range devs {
		hasCUDA = hasCUDA || d.Name() == "cuda"
	}
	for _, tc := range []struct {
		name string
		// edit changes the flags of a good run; it may write files.
		edit  func(t *testing.T, f *inferFlags)
		want  []string // substrings of the message; "$weights" etc. stand for the flag's value
		usage bool     // exit status 2
	}{
		// Command line.
		{name: "missing --weights", edit: func(t *testing.T, f *inferFlags) { f.weights = "" },
			want: []string{"missing required flag --weights"}, usage: true},
		{name: "missing several", edit: func(t *testing.T, f *inferFlags) { f.model, f.output = "", "" },
			want: []string{"missing required flag --model, --output"}, usage: true},
		{name: "unknown --model", edit: func(t *testing.T, f *inferFlags) { f.model = "vit" },
			want: []string{`unknown --model "vit" (want bert, gpt2, llama, resnet101,`}, usage: true},
		{name: "unknown --dtype", edit: func(t *testing.T, f *inferFlags) { f.dtype = "fp8" },
			want: []string{`unknown --dtype "fp8" for bert (want f32, f16, bf16, mixed)`}, usage: true},
		{name: "unknown --device", edit: func(t *testing.T, f *inferFlags) { f.device = "tpu" },
			want: []string{`unknown --device "tpu"`, "available here: cpu"}, usage: true},

		// Weights.
		{name: "weights missing", edit: func(t *testing.T, f *inferFlags) { f.weights = filepath.Join(t.TempDir(), "none.safetensors") },
			want: []string{"infer: weights $weights: no such file"}},
		{name: "weights truncated", edit: func(t *testing.T, f *inferFlags) {
			f.weights = editBytes(t, tinyWeights, func(b []byte) []byte { return b[:len(b)-100] })
		}, want: []string{"weights:", "$weights", "data section"}},
		{name: "weights cut in the header", edit: func(t *testing.T, f *inferFlags) {
			f.weights = editBytes(t, tinyWeights, func(b []byte) []byte { return b[:200] })
		}, want: []string{"weights:", "$weights", "header length"}},
		{name: "weights header bytes flipped", edit: func(t *testing.T, f *inferFlags) {
			f.weights = editBytes(t, tinyWeights, func(b []byte) []byte {
				for i := 40; i < 44; i++ {
					b[i] ^= 0xff
				}
				return b
			})
		}, want: []string{"weights:", "$weights", "header is not valid UTF-8"}},
		{name: "weights not BERT", edit: func(t *testing.T, f *inferFlags) { f.weights = tinyOutput },
			want: []string{"weights:", "$weights", "not a BERT checkpoint"}},
		{name: "tensor missing", edit: func(t *testing.T, f *inferFlags) {
			f.weights = rewrite(t, tinyWeights, replace(t, "bert.encoder.layer.1.output.dense.bias",
				func(safetensors.Tensor) safetensors.Tensor { return safetensors.Tensor{} }))
		}, want: []string{"$weights", `missing tensor "bert.encoder.layer.1.output.dense.bias"`}},
		{name: "tensor of the wrong shape", edit: func(t *testing.T, f *inferFlags) {
			f.weights = rewrite(t, tinyWeights, replace(t, "bert.pooler.dense.weight", func(x safetensors.Tensor) safetensors.Tensor {
				x.Shape = []int{16, 64}
				return x
			}))
		}, want: []string{"$weights", `"bert.pooler.dense.weight" has shape [16 64]`, "[32 32]"}},
		{name: "NaN in the weights", edit: func(t *testing.T, f *inferFlags) {
			f.weights = rewrite(t, tinyWeights, replace(t, "bert.pooler.dense.bias", func(x safetensors.Tensor) safetensors.Tensor {
				v := make([]float32, 32)
				v[5] = float32(math.NaN())
				return f32Tensor(x.Name, v, x.Shape...)
			}))
		}, want: []string{"pooler_output[3 32] has NaN at [0 5]", "no output written"}},

		// Config.
		{name: "config has more layers", edit: func(t *testing.T, f *inferFlags) { f.config = tinyConfigWith(t, "num_hidden_layers", 3) },
			want: []string{"config $config", "$weights", `missing tensor "bert.encoder.layer.2.`}},
		{name: "config has fewer layers", edit: func(t *testing.T, f *inferFlags) { f.config = tinyConfigWith(t, "num_hidden_layers", 1) },
			want: []string{"config $config", `"bert.encoder.layer.1.`, "is not used by the config"}},
		{name: "config of another width", edit: func(t *testing.T, f *inferFlags) { f.config = tinyConfigWith(t, "hidden_size", 64) },
			want: []string{"$weights", "has shape [99 32], the config wants [99 64]"}},
		{name: "config not JSON", edit: func(t *testing.T, f *inferFlags) {
			f.config = editBytes(t, tinyConfig, func(b []byte) []byte { return b[:len(b)/2] })
		}, want: []string{"$config", "not a JSON object"}},
		{name: "config missing", edit: func(t *testing.T, f *inferFlags) { f.config = filepath.Join(t.TempDir(), "config.json") },
			want: []string{"$config", "no such file"}},

		// Inputs.
		{name: "input missing", edit: func(t *testing.T, f *inferFlags) { f.input = filepath.Join(t.TempDir(), "in.safetensors") },
			want: []string{"input:", "$input", "no such file"}},
		{name: "input corrupt", edit: func(t *testing.T, f *inferFlags) {
			f.input = editBytes(t, tinyInput, func(b []byte) []byte { return b[:len(b)-8] })
		}, want: []string{"input:", "$input"}},
		{name: "float input_ids", edit: func(t *testing.T, f *inferFlags) {
			f.input = rewrite(t, tinyInput, replace(t, "input_ids", func(x safetensors.Tensor) safetensors.Tensor {
				return f32Tensor(x.Name, make([]float32, 33), 3, 11)
			}))
		}, want: []string{"$input", `tensor "input_ids" has dtype F32, want an integer dtype`}},
		{name: "float attention_mask", edit: func(t *testing.T, f *inferFlags) {
			f.input = rewrite(t, tinyInput, replace(t, "attention_mask", func(x safetensors.Tensor) safetensors.Tensor {
				return f32Tensor(x.Name, make([]float32, 33), 3, 11)
			}))
		}, want: []string{"$input", `tensor "attention_mask" has dtype F32`}},
		{name: "unexpected tensor", edit: func(t *testing.T, f *inferFlags) {
			f.input = rewrite(t, tinyInput, func(ts []safetensors.Tensor) []safetensors.Tensor {
				return append(ts, i64Tensor("token_type_id", make([]int64, 33), 3, 11))
			})
		}, want: []string{"$input", `unexpected tensor "token_type_id" (want input_ids, attention_mask, token_type_ids)`}},
		{name: "no input_ids", edit: func(t *testing.T, f *inferFlags) {
			f.input = rewrite(t, tinyInput, replace(t, "input_ids", func(safetensors.Tensor) safetensors.Tensor { return safetensors.Tensor{} }))
		}, want: []string{"$input", `no tensor "input_ids"`}},
		{name: "1-D input_ids", edit: func(t *testing.T, f *inferFlags) {
			f.input = writeTensors(t, i64Tensor("input_ids", []int64{1, 2, 3}, 3))
		}, want: []string{"$input", `"input_ids" has shape [3], want 2-D [batch, seq]`}},
		{name: "empty input_ids", edit: func(t *testing.T, f *inferFlags) {
			f.input = writeTensors(t, i64Tensor("input_ids", nil, 0, 4))
		}, want: []string{"$input", `"input_ids" has shape [0 4], want batch and seq > 0`}},
		{name: "attention_mask shape", edit: func(t *testing.T, f *inferFlags) {
			f.input = rewrite(t, tinyInput, replace(t, "attention_mask", func(x safetensors.Tensor) safetensors.Tensor {
				return i64Tensor(x.Name, make([]int64, 30), 3, 10)
			}))
		}, want: []string{"$input", `tensor "attention_mask" has shape [3 10], want [3 11] as input_ids`}},
		{name: "token_type_ids shape", edit: func(t *testing.T, f *inferFlags) {
			f.input = rewrite(t, tinyInput, replace(t, "token_type_ids", func(x safetensors.Tensor) safetensors.Tensor {
				return i64Tensor(x.Name, make([]int64, 33), 33)
			}))
		}, want: []string{"$input", `tensor "token_type_ids" has shape [33], want [3 11]`}},
		{name: "id outside the vocabulary", edit: func(t *testing.T, f *inferFlags) {
			ids := make([]int64, 8)
			ids[6] = 99
			f.input = writeTensors(t, i64Tensor("input_ids", ids, 2, 4))
		}, want: []string{"$input", "input_ids[1, 2] = 99 is outside the vocabulary [0, 99)"}},
		{name: "id beyond int32", edit: func(t *testing.T, f *inferFlags) {
			f.input = writeTensors(t, i64Tensor("input_ids", []int64{1, 1 << 40}, 1, 2))
		}, want: []string{"$input", `"input_ids"`, "does not fit in int32"}},
		{name: "left padding", edit: func(t *testing.T, f *inferFlags) {
			f.input = writeTensors(t, i64Tensor("input_ids", make([]int64, 4), 1, 4),
				i64Tensor("attention_mask", []int64{0, 1, 1, 1}, 1, 4))
		}, want: []string{"$input", "attention_mask row 0", "only right padding"}},
		{name: "sequence too long", edit: func(t *testing.T, f *inferFlags) {
			f.input = writeTensors(t, i64Tensor("input_ids", make([]int64, 65), 1, 65))
		}, want: []string{"$input", "seq 65 exceeds max_position_embeddings 64"}},

		// Output.
		{name: "output directory missing", edit: func(t *testing.T, f *inferFlags) { f.output = filepath.Join(t.TempDir(), "no", "out.safetensors") },
			want: []string{"output $output", "cannot create a file in", "no such file"}},
		{name: "output is a directory", edit: func(t *testing.T, f *inferFlags) { f.output = t.TempDir() },
			want: []string{"output $output: is a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := tinyFlags(t)
			tc.edit(t, &fl)
			outDir := filepath.Dir(fl.output)
			before, _ := os.ReadDir(outDir)
			var stdout, stderr bytes.Buffer
			err := run(fl.args(), &stdout, &stderr)
			require.Error(t, err)
			msg := err.Error()
			t.Log(msg)
			assert.NotContains(t, msg, "\n", "one line")
			paths := strings.NewReplacer("$weights", fl.weights, "$config", fl.config, "$input", fl.input, "$output", fl.output)
			for _, w := range tc.want {
				assert.Contains(t, msg, paths.Replace(w))
			}
			if tc.usage {
				assert.Equal(t, 2, exitCode(err), "usage error")
			} else {
				assert.Equal(t, 1, exitCode(err))
			}
			assert.Empty(t, stdout.String())
			if st, err := os.Stat(fl.output); err == nil {
				assert.True(t, st.IsDir(), "a failed run leaves no output file")
			}
			after, _ := os.ReadDir(outDir)
			assert.Equal(t, len(before), len(after), "a failed run leaves no temporary file in %s", outDir)
		})
	}

	t.Run("cuda unavailable", func(t *testing.T) {
		if hasCUDA {
			t.Skip("this binary has a CUDA device")
		}
		fl := tinyFlags(t)
		fl.device = "cuda"
		err := run(fl.args(), new(bytes.Buffer), new(bytes.Buffer))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--device cuda is not available here (available: cpu)")
		assert.Contains(t, err.Error(), "-tags cuda")
		assert.NotContains(t, err.Error(), "\n")
		assert.Equal(t, 1, exitCode(err))
	})
}

// copyFiles copies the named files of bert-tiny into a new temporary
// directory and returns it.
func copyFiles(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(bertTiny, n))
		require.NoError(t, err)
		writeFile(t, dir, n, b)
	}
	return dir
}

// TestInferCheckpointDir checks that --weights takes a checkpoint as Hugging
// Face stores it, a directory, as well as one file, with config.json found
// beside the weights unless --config overrides it.
func TestInferCheckpointDir(t *testing.T) {
	override := writeFile(t, t.TempDir(), "other.json", []byte(readString(t, tinyConfig)))
	noConfig := copyFiles(t, "model.safetensors")
	noWeights := copyFiles(t, "config.json")
	sharded := copyFiles(t, "config.json")
	writeFile(t, sharded, "model.safetensors.index.json", []byte(`{"weight_map": {
		"bert.embeddings.word_embeddings.weight": "model-00001-of-00002.safetensors",
		"bert.pooler.dense.weight": "model-00002-of-00002.safetensors"}}`))
	writeFile(t, sharded, "model-00001-of-00002.safetensors", nil)
	writeFile(t, sharded, "model-00002-of-00002.safetensors", nil)

	_, want := tensors(t, tinyOutput)
	for _, tc := range []struct {
		name            string
		weights, config string
		wantConfig      string // the config named in the output's metadata
		wantErr         string // "" for success
	}{
		{name: "directory", weights: bertTiny, wantConfig: "config.json"},
		{name: "file, config beside it", weights: tinyWeights, wantConfig: "config.json"},
		{name: "directory, config overridden", weights: bertTiny, config: override, wantConfig: "other.json"},
		{name: "missing config", weights: noConfig,
			wantErr: "infer: config " + filepath.Join(noConfig, "config.json") + ": no config.json beside the weights (give --config)"},
		{name: "missing config beside a file", weights: filepath.Join(noConfig, "model.safetensors"),
			wantErr: "infer: config " + filepath.Join(noConfig, "config.json") + ": no config.json beside the weights"},
		{name: "missing weights", weights: noWeights,
			wantErr: "infer: weights " + noWeights + ": no model.safetensors or model.safetensors.index.json in the directory"},
		{name: "missing override", weights: bertTiny, config: filepath.Join(noWeights, "nope.json"),
			wantErr: "infer: config " + filepath.Join(noWeights, "nope.json") + ": no such file or directory"},
		{name: "sharded", weights: sharded,
			wantErr: "infer: weights: " + filepath.Join(sharded, "model.safetensors.index.json") + " lists 2 shards; the bert loader reads one file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := tinyFlags(t)
			fl.weights, fl.config = tc.weights, tc.config
			var stdout, stderr bytes.Buffer
			err := run(fl.args(), &stdout, &stderr)
			if tc.wantErr != "" {
				requireCLIError(t, err, tc.wantErr, false)
				assert.NoFileExists(t, fl.output)
				return
			}
			require.NoError(t, err)
			f, got := tensors(t, fl.output)
			require.Len(t, got, len(want))
			for i := range want {
				rel, _ := kernels.RelErr(float64s(t, got[i]), float64s(t, want[i]))
				assert.LessOrEqual(t, rel, 1e-4, want[i].Name)
			}
			assert.Equal(t, "model.safetensors", f.Metadata()["weights"])
			assert.Equal(t, tc.wantConfig, f.Metadata()["config"])
		})
	}
}
