package nn_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

// f32 builds an F32 safetensors tensor.
func f32(name string, vals []float32, shape ...int) safetensors.Tensor {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: b}
}

// bf16 builds a BF16 safetensors tensor of values exact in bfloat16.
func bf16(name string, vals []float32, shape ...int) safetensors.Tensor {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint16(b, uint16(math.Float32bits(v)>>16))
	}
	return safetensors.Tensor{Name: name, DType: "BF16", Shape: shape, Data: b}
}

// writeShards writes each list of tensors to a shard file of a new
// directory, named as Hugging Face names them, and returns their paths.
func writeShards(t *testing.T, shards ...[]safetensors.Tensor) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i, ts := range shards {
		var buf bytes.Buffer
		require.NoError(t, safetensors.Write(&buf, ts, map[string]string{"format": "pt"}))
		p := filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards)))
		require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
		paths = append(paths, p)
	}
	return paths
}

// testNames are a model's names: parameters live under "model." in the
// files, a norm may be stored under its legacy name "norm.gamma", and
// rotary inv_freq buffers may stay unread.
var testNames = nn.Names{
	Model: "toy",
	Candidates: func(param string) []string {
		names := []string{"model." + param}
		if alt, ok := strings.CutSuffix(param, "norm.weight"); ok {
			names = append(names, "model."+alt+"norm.gamma")
		}
		return names
	},
	Ignored: func(name string) bool { return strings.HasSuffix(name, "inv_freq") },
}

// toyParams are the parameters of the toy model.
var toyParams = []nn.Param{{"embed.weight", []int{3, 2}}, {"norm.weight", []int{2}}, {"head.weight", []int{2, 2}}}

// toyShards are the toy model's tensors over two shards.
func toyShards() [][]safetensors.Tensor {
	return [][]safetensors.Tensor{
		{f32("model.embed.weight", []float32{1, 2, 3, 4, 5, 6}, 3, 2), f32("model.norm.weight", []float32{1, 1}, 2)},
		{bf16("model.head.weight", []float32{0.5, -1, 2, 0.25}, 2, 2), f32("model.layers.0.rotary.inv_freq", []float32{1}, 1)},
	}
}

func TestCheckpointShards(t *testing.T) {
	paths := writeShards(t, toyShards()...)
	c, err := nn.OpenCheckpoint(paths, testNames)
	require.NoError(t, err)
	assert.Equal(t, "2 shards in "+filepath.Dir(paths[0]), c.String())
	want := map[string][]float32{
		"embed.weight": {1, 2, 3, 4, 5, 6},
		"norm.weight":  {1, 1},
		"head.weight":  {0.5, -1, 2, 0.25},
	}
	for _, p := range toyParams {
		v, err := c.Values(p)
		require.NoError(t, err, p.Name)
		assert.Equal(t, want[p.Name], v, p.Name)
	}
	require.NoError(t, c.CheckUnused(), "inv_freq is ignored")
	for param, dt := range map[string]string{"embed.weight": "F32", "head.weight": "BF16"} {
		got, err := c.DType(param)
		require.NoError(t, err)
		assert.Equal(t, dt, got, param)
	}

	// One file holds the same tensors as well.
	one, err := nn.OpenCheckpoint(writeShards(t, append(toyShards()[0], toyShards()[1]...)), testNames)
	require.NoError(t, err)
	for _, p := range toyParams {
		v, err := one.Values(p)
		require.NoError(t, err)
		assert.Equal(t, want[p.Name], v, p.Name)
	}
}

func TestCheckpointCandidates(t *testing.T) {
	shards := toyShards()
	shards[0][1].Name = "model.norm.gamma" // the legacy name
	c, err := nn.OpenCheckpoint(writeShards(t, shards...), testNames)
	require.NoError(t, err)
	v, err := c.Values(toyParams[1])
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 1}, v)

	// Both names present: the first candidate is read, the other is unused.
	shards = toyShards()
	shards[1] = append(shards[1], f32("model.norm.gamma", []float32{7, 7}, 2))
	c, err = nn.OpenCheckpoint(writeShards(t, shards...), testNames)
	require.NoError(t, err)
	for _, p := range toyParams {
		v, err := c.Values(p)
		require.NoError(t, err)
		if p.Name == "norm.weight" {
			assert.Equal(t, []float32{1, 1}, v)
		}
	}
	assert.ErrorContains(t, c.CheckUnused(), `tensor "model.norm.gamma" is not used`)
}

func TestCheckpointErrors(t *testing.T) {
	edit := func(fn func(shards [][]safetensors.Tensor) [][]safetensors.Tensor) [][]safetensors.Tensor {
		return fn(toyShards())
	}
	tests := []struct {
		name   string
		shards [][]safetensors.Tensor
		params []nn.Param
		want   []string // substrings of the message, besides "toy: " first
		file   int      // the shard the message names, -1 for the directory
	}{
		{"missing tensor", edit(func(s [][]safetensors.Tensor) [][]safetensors.Tensor {
			s[1] = s[1][1:]
			return s
		}), toyParams, []string{`missing tensor "model.head.weight"`}, -1},
		{"missing norm names the first candidate", edit(func(s [][]safetensors.Tensor) [][]safetensors.Tensor {
			s[0] = s[0][:1]
			return s
		}), toyParams, []string{`missing tensor "model.norm.weight"`}, -1},
		{"wrong shape", edit(func(s [][]safetensors.Tensor) [][]safetensors.Tensor {
			s[1][0].Shape = []int{4, 1}
			return s
		}), toyParams, []string{`"model.head.weight" has shape [4 1], the config wants [2 2]`}, 1},
		{"integer weights", edit(func(s [][]safetensors.Tensor) [][]safetensors.Tensor {
			s[0][1].DType = "I32"
			return s
		}), toyParams, []string{`"model.norm.weight" has dtype I32`, "floating point"}, 0},
		{"unused tensor", edit(func(s [][]safetensors.Tensor) [][]safetensors.Tensor {
			s[1] = append(s[1], f32("model.layers.1.extra", []float32{1}, 1))
			return s
		}), toyParams, []string{`"model.layers.1.extra" is not used`}, 1},
		{"tensor of a parameter not loaded", toyShards(), toyParams[:2], []string{`"model.head.weight" is not used`}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			paths := writeShards(t, tc.shards...)
			c, err := nn.OpenCheckpoint(paths, testNames)
			require.NoError(t, err)
			set := nn.NewTensorSet(cpuBackend(t))
			err = nn.LoadParams(set, c, tc.params, kernels.F32)
			require.NoError(t, set.Free())
			require.Error(t, err)
			assert.ErrorIs(t, err, nn.ErrWeights)
			assert.True(t, strings.HasPrefix(err.Error(), "toy: "), "%q starts with the model's name", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			if tc.file >= 0 {
				assert.Contains(t, err.Error(), paths[tc.file]+":", "the message names the file")
			} else {
				assert.Contains(t, err.Error(), filepath.Dir(paths[0]), "the message names the checkpoint")
			}
		})
	}
}

func TestCheckpointDuplicateAcrossShards(t *testing.T) {
	shards := toyShards()
	shards[1] = append(shards[1], f32("model.norm.weight", []float32{2, 2}, 2))
	paths := writeShards(t, shards...)
	_, err := nn.OpenCheckpoint(paths, testNames)
	require.ErrorIs(t, err, nn.ErrWeights)
	assert.ErrorContains(t, err, `toy: tensor "model.norm.weight" is in two files, `+paths[0]+" and "+paths[1])
}

func TestCheckpointOpenErrors(t *testing.T) {
	paths := writeShards(t, toyShards()...)
	missing := filepath.Join(t.TempDir(), "nope.safetensors")
	_, err := nn.OpenCheckpoint([]string{paths[0], missing}, testNames)
	require.Error(t, err)
	assert.ErrorContains(t, err, missing)
	assert.True(t, strings.HasPrefix(err.Error(), "toy: "), err.Error())

	require.NoError(t, os.WriteFile(paths[1], []byte("not safetensors"), 0o644))
	_, err = nn.OpenCheckpoint(paths, testNames)
	assert.ErrorIs(t, err, safetensors.ErrInvalid)

	_, err = nn.NewCheckpoint(nil, testNames)
	assert.ErrorIs(t, err, nn.ErrWeights)
}

func TestCheckpointDefaultNames(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, []safetensors.Tensor{f32("w", []float32{1, 2}, 2)}, nil))
	f, err := safetensors.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	c, err := nn.NewCheckpoint([]*safetensors.File{f}, nn.Names{})
	require.NoError(t, err)
	assert.Equal(t, "checkpoint", c.String(), "a file read from memory")
	_, err = c.Values(nn.Param{Name: "v", Shape: []int{2}})
	require.ErrorIs(t, err, nn.ErrWeights)
	assert.Equal(t, `checkpoint: missing tensor "v" (check config.json matches the weights): bad weights`, err.Error(),
		"no model name, the parameter's own name")
	require.ErrorContains(t, c.CheckUnused(), `tensor "w" is not used`)
	v, err := c.Values(nn.Param{Name: "w", Shape: []int{2}})
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2}, v)
	assert.NoError(t, c.CheckUnused())
}
