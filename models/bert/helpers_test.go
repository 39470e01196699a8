package bert_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

// tinyTensors returns copies of every tensor of the tiny checkpoint, in the
// file's (sorted) order.
func tinyTensors(t testing.TB) []safetensors.Tensor {
	t.Helper()
	f, err := safetensors.Open(tinyModel)
	require.NoError(t, err)
	var out []safetensors.Tensor
	for _, n := range f.Tensors() {
		x, err := f.Tensor(n)
		require.NoError(t, err)
		x.Data = bytes.Clone(x.Data)
		out = append(out, x)
	}
	return out
}

// writeCheckpoint writes tensors to a new file in a temporary directory
// and returns its path.
func writeCheckpoint(t testing.TB, tensors []safetensors.Tensor) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, tensors, map[string]string{"format": "pt"}))
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// mapTensors returns a copy of ts with fn applied; fn returns false to drop
// a tensor.
func mapTensors(ts []safetensors.Tensor, fn func(*safetensors.Tensor) bool) []safetensors.Tensor {
	var out []safetensors.Tensor
	for _, x := range ts {
		x.Shape = append([]int(nil), x.Shape...)
		if fn(&x) {
			out = append(out, x)
		}
	}
	return out
}

// f32Tensor builds an F32 safetensors tensor.
func f32Tensor(name string, vals []float32, shape ...int) safetensors.Tensor {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		bits := math.Float32bits(v)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
	}
	return safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: b}
}

// tinyInputs are testdata/golden/bert-tiny/input.safetensors: a batch of
// 3 right-padded rows of 11 tokens (lengths 11, 7, 2).
func tinyInputs(t testing.TB) (in bert.Inputs, batch, seq int) {
	t.Helper()
	f, err := safetensors.Open(tinyDir + "/input.safetensors")
	require.NoError(t, err)
	get := func(name string) []int32 {
		x, err := f.Tensor(name)
		require.NoError(t, err)
		require.Equal(t, []int{3, 11}, x.Shape)
		v, err := x.Int32()
		require.NoError(t, err)
		return v
	}
	return bert.Inputs{IDs: get("input_ids"), TypeIDs: get("token_type_ids"), Mask: get("attention_mask")}, 3, 11
}

// loadTiny loads src with the tiny config on a fresh CPU backend.
func loadTiny(t testing.TB, src nn.Source, prec nn.Precision) *bert.Model {
	t.Helper()
	m, err := bert.Load(cpu.New(), tinyCfg(), src, prec)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

// run returns last_hidden_state and pooler_output of m on in.
func run(t testing.TB, m *bert.Model, in bert.Inputs, batch, seq int) (hidden, pooled []float32) {
	t.Helper()
	f, err := m.NewForward(batch, seq)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	require.NoError(t, f.SetInputs(in))
	require.NoError(t, f.Run())
	require.NoError(t, m.Backend().Sync())
	hidden, err = f.LastHidden()
	require.NoError(t, err)
	pooled, err = f.Pooled()
	require.NoError(t, err)
	return hidden, pooled
}

// relErr is ‖got − want‖ / ‖want‖.
func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}
