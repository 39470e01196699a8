package kerneltest

import (
	"bytes"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/internal/golden"
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
)

// TestGoldenFiles checks that each golden file has the reference
// implementation's canonical layout (the Python writer agrees with
// safetensors.Write byte for byte), records its provenance and stays
// small, that every case loads with finite expected values (but for the
// cases that say how NaN propagates), and that the files cover every op
// of goldenOps and, for the vision ops, every dtype, grouped
// convolutions, the epilogue's roles and NaN in max pooling.
func TestGoldenFiles(t *testing.T) {
	seen := map[string]bool{}
	for _, file := range GoldenFiles {
		t.Run(file, func(t *testing.T) {
			f, err := golden.Open(file)
			require.NoError(t, err)
			require.NoError(t, f.Canonical())
			meta := f.Metadata()
			assert.True(t, strings.HasPrefix(meta["reference"], "torch "), "reference = %q", meta["reference"])
			assert.Equal(t, "testdata/reference/kernels.py", meta["script"])
			st, err := os.Stat(f.Path())
			require.NoError(t, err)
			assert.Less(t, st.Size(), int64(2<<20), "golden file should stay small")
			for _, name := range f.Names() {
				c, err := loadGoldenCase(f.File, name)
				require.NoError(t, err)
				p := c.Params
				seen[p.Op], seen[p.Op+"/"+p.DType] = true, true
				for role := range c.Inputs {
					seen[p.Op+"/"+role] = true
				}
				if p.Groups > 1 {
					seen["groups"] = true
				}
				if p.NaN != "" {
					seen["nan"] = true
					continue
				}
				for role, r := range c.Outputs {
					for i, v := range r.Values() {
						if math.IsNaN(v) || math.IsInf(v, 0) {
							t.Fatalf("case %s: expected %s[%d] = %v", name, role, i, v)
						}
					}
				}
			}
		})
	}
	for op := range goldenOps {
		assert.True(t, seen[op], "no golden case for op %s", op)
	}
	for _, op := range []string{"conv2d", "max_pool2d", "global_avg_pool"} {
		for _, dt := range goldenFloatTypes {
			assert.True(t, seen[op+"/"+dt.String()], "no %s case in %v", op, dt)
		}
	}
	for _, k := range []string{"conv2d/bias", "conv2d/residual", "groups", "nan"} {
		assert.True(t, seen[k], "no golden case covers %s", k)
	}
}

// goldenFile builds an in-memory golden file from tensors and params.
func goldenFile(t *testing.T, tensors []safetensors.Tensor, params map[string]string) *safetensors.File {
	t.Helper()
	meta := map[string]string{"format": "test", "reference": "torch test", "script": "test", "seed": "0"}
	for k, v := range params {
		meta[k] = v
	}
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, tensors, meta))
	f, err := safetensors.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	return f
}

func zerosF32(name string, shape ...int) safetensors.Tensor {
	n := kernels.Shape(shape).Len()
	return safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: make([]byte, 4*n)}
}

// TestGoldenCaseErrors checks that a mismatched golden case is reported
// clearly rather than skipped or misread.
func TestGoldenCaseErrors(t *testing.T) {
	const (
		mm   = `{"act":"none","alpha":1.0,"beta":0.0,"bias":false,"dtype":"f32","op":"matmul","trans_a":false,"trans_b":false}`
		am   = `{"dtype":"f32","op":"argmax"}`
		conv = `{"act":"relu","dilation":[1,1],"dtype":"f32","groups":1,"op":"conv2d","padding":[0,0],"stride":[1,1]}`
		pool = `{"dilation":[1,1],"dtype":"f32","kernel":[2,2],"op":"max_pool2d","padding":[0,0],"stride":[1,1]}`
	)
	good := []safetensors.Tensor{zerosF32("c/a", 3, 4), zerosF32("c/b", 4, 5), zerosF32("c/out", 3, 5)}
	amx := zerosF32("c/x", 3, 7)
	amOut := safetensors.Tensor{Name: "c/out", DType: "I32", Shape: []int{3}, Data: make([]byte, 12)}
	x, w, out := zerosF32("c/x", 1, 2, 3, 3), zerosF32("c/w", 4, 2, 1, 1), zerosF32("c/out", 1, 4, 3, 3)
	poolOut := zerosF32("c/out", 1, 2, 2, 2)
	tests := []struct {
		name    string
		tensors []safetensors.Tensor
		params  string
		want    string
	}{
		{"valid", good, mm, ""},
		{"missing role", good[1:], mm, `golden case "c": role "a": safetensors: tensor "c/a" not in the safetensors data`},
		{"wrong shape", []safetensors.Tensor{good[0], zerosF32("c/b", 5, 4), good[2]}, mm, "disagree on K: 4 vs 5"},
		{"wrong output shape", []safetensors.Tensor{good[0], good[1], zerosF32("c/out", 5, 3)}, mm, "out has shape [5 3], want [3 5]"},
		{"unexpected role", append(slices.Clone(good), zerosF32("c/bias", 5)), mm, `unexpected tensor "c/bias"`},
		{"flag without role", good, strings.Replace(mm, `"bias":false`, `"bias":true`, 1), `role "bias": safetensors: tensor "c/bias" not in`},
		{
			"wrong dtype",
			[]safetensors.Tensor{{Name: "c/a", DType: "F16", Shape: []int{3, 4}, Data: make([]byte, 24)}, good[1], good[2]},
			mm, `role "a" is F16, want f32`,
		},
		{"unknown op", good, strings.Replace(mm, `"matmul"`, `"conv3d"`, 1), `unknown op "conv3d"`},
		{"unknown param", good, strings.Replace(mm, `"act"`, `"acts"`, 1), `unknown field "acts"`},
		{"missing param", good, strings.Replace(mm, `"alpha":1.0,`, ``, 1), `no "alpha"`},
		{"param of another op", good, strings.Replace(mm, `{`, `{"groups":1,`, 1), `unexpected "groups"`},
		{"bad activation", good, strings.Replace(mm, `"none"`, `"swish"`, 1), `unknown activation "swish"`},
		{"bad dtype", good, strings.Replace(mm, `"f32"`, `"f64"`, 1), `dtype "f64", want one of [f32 f16 bf16] for op matmul`},
		{"dtype of another op", good, strings.Replace(mm, `"f32"`, `"i32"`, 1), `dtype "i32", want one of [f32 f16 bf16] for op matmul`},
		{"invalid params", good, `{"op":`, "parameters {\"op\":"},

		{"valid argmax", []safetensors.Tensor{amx, amOut}, am, ""},
		{"float indices", []safetensors.Tensor{amx, zerosF32("c/out", 3)}, am, `role "out" is F32, want i32`},
		{"wrong index shape", []safetensors.Tensor{amx, {Name: "c/out", DType: "I32", Shape: []int{7}, Data: make([]byte, 28)}}, am,
			"out has shape [7], want [3]"},
		{"unexpected argmax role", []safetensors.Tensor{amx, amOut, zerosF32("c/y", 3)}, am, `unexpected tensor "c/y"`},
		{"param of a decoder op", []safetensors.Tensor{amx, amOut}, strings.Replace(am, `{`, `{"scale":0.5,`, 1), `unexpected "scale"`},
		{"missing decoder param", []safetensors.Tensor{amx, amOut}, strings.Replace(am, "argmax", "cached_attention", 1), `no "scale"`},

		{"valid conv2d", []safetensors.Tensor{x, w, out}, conv, ""},
		{"valid conv2d with bias", []safetensors.Tensor{x, w, out, zerosF32("c/bias", 4)}, conv, ""},
		{"no filter", []safetensors.Tensor{x, out}, conv, `role "w": safetensors: tensor "c/w" not in`},
		{"unexpected conv2d role", []safetensors.Tensor{x, w, out, zerosF32("c/scale", 4)}, conv, `unexpected tensor "c/scale"`},
		{"unknown conv2d act", []safetensors.Tensor{x, w, out}, strings.Replace(conv, "relu", "swish", 1), `unknown activation "swish"`},
		{"missing conv2d param", []safetensors.Tensor{x, w, out}, strings.Replace(conv, `"groups":1,`, "", 1), `no "groups"`},
		{"3-D image", []safetensors.Tensor{zerosF32("c/x", 2, 3, 3), w, out}, conv, "x has shape [2 3 3], want 4 dimensions (NCHW)"},
		{"valid max_pool2d", []safetensors.Tensor{x, poolOut}, pool, ""},
		{"max_pool2d with nan", []safetensors.Tensor{x, poolOut}, strings.Replace(pool, `{`, `{"nan":"propagates",`, 1), ""},
		{"nan of another op", []safetensors.Tensor{x, w, out}, strings.Replace(conv, `{`, `{"nan":"propagates",`, 1), `unexpected "nan"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := goldenFile(t, tc.tensors, map[string]string{"c": tc.params})
			c, err := loadGoldenCase(f, "c")
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, "c", c.Name)
				return
			}
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	t.Run("no params", func(t *testing.T) {
		f := goldenFile(t, good, nil)
		_, err := loadGoldenCase(f, "c")
		require.Error(t, err)
		assert.Contains(t, err.Error(), `golden case "c": no parameters in the metadata`)
	})
}

// TestGoldenCaseLayout checks what loading does to a case's values:
// NCHW roles moved to NHWC (bias left alone), integer roles and outputs
// read as I32.
func TestGoldenCaseLayout(t *testing.T) {
	f32 := func(name string, vals []float32, shape ...int) safetensors.Tensor {
		tt := safetensors.Tensor{Name: name, DType: "F32", Shape: shape}
		for _, v := range vals {
			tt.Data = append(tt.Data, byte(math.Float32bits(v)), byte(math.Float32bits(v)>>8), byte(math.Float32bits(v)>>16), byte(math.Float32bits(v)>>24))
		}
		return tt
	}
	const conv = `{"act":"none","dilation":[1,1],"dtype":"f32","groups":1,"op":"conv2d","padding":[0,0],"stride":[1,1]}`
	f := goldenFile(t, []safetensors.Tensor{
		f32("c/x", []float32{1, 2, 3, 4, 5, 6}, 1, 2, 1, 3), // [N, C, H, W]: channel 0 is 1 2 3
		zerosF32("c/w", 2, 2, 1, 1),
		f32("c/bias", []float32{7, 8}, 2),
		zerosF32("c/out", 1, 2, 1, 3),
	}, map[string]string{"c": conv})
	c, err := loadGoldenCase(f, "c")
	require.NoError(t, err)
	assert.Equal(t, kernels.Shape{1, 1, 3, 2}, c.Inputs["x"].Shape)
	assert.Equal(t, []float32{1, 4, 2, 5, 3, 6}, c.Inputs["x"].F32)
	assert.Equal(t, []float32{7, 8}, c.Inputs["bias"].F32)
	assert.Equal(t, kernels.Shape{1, 1, 3, 2}, c.Outputs["out"].Shape)
	assert.Equal(t, kernels.I32, (&goldenCase{Params: goldenParams{Op: "argmax"}, DType: kernels.BF16}).roleDType("out"))
	assert.Equal(t, kernels.F32, (&goldenCase{Params: goldenParams{Op: "rope"}, DType: kernels.BF16}).roleDType("inv_freq"))
	assert.Equal(t, kernels.BF16, (&goldenCase{Params: goldenParams{Op: "rope"}, DType: kernels.BF16}).roleDType("x"))
}

// TestGoldenGroups checks that every golden op looks up its op group: a
// backend without the group is refused with kernels.Group's error, which
// RunGolden skips with.
func TestGoldenGroups(t *testing.T) {
	for op, spec := range goldenOps {
		_, err := spec.bind(bare{})
		switch op {
		case "rope", "swiglu", "cache_write", "cached_attention", "argmax":
			require.ErrorIs(t, err, kernels.ErrUnsupported, op)
			assert.ErrorContains(t, err, "the bare backend has no Decoder ops", op)
		case "conv2d", "max_pool2d", "global_avg_pool":
			require.ErrorIs(t, err, kernels.ErrUnsupported, op)
			assert.ErrorContains(t, err, "the bare backend has no Vision ops", op)
		default:
			assert.NoError(t, err, op)
		}
	}
}

// bare is a backend with only the Backend ops (only Name is called).
type bare struct{ kernels.Backend }

func (bare) Name() string { return "bare" }
