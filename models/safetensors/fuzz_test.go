package safetensors_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/safetensors"
)

// FuzzRead checks that Read never panics and that whatever it accepts
// survives a Write/Read round trip unchanged.
func FuzzRead(f *testing.F) {
	valid := [][]safetensors.Tensor{nil, sampleTensors()[:1], sampleTensors()}
	for i, ts := range valid {
		var buf bytes.Buffer
		meta := map[string]string{"seed": "1"}
		if i == 0 {
			meta = nil
		}
		require.NoError(f, safetensors.Write(&buf, ts, meta))
		f.Add(buf.Bytes())
	}
	for _, c := range corruptions() {
		f.Add(c.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		first, err := read(data)
		if err != nil {
			require.Nil(t, first)
			return
		}
		var tensors []safetensors.Tensor
		for _, name := range first.Tensors() {
			tt, err := first.Tensor(name)
			require.NoError(t, err)
			require.Equal(t, name, tt.Name)
			tensors = append(tensors, tt)
		}
		var buf bytes.Buffer
		require.NoError(t, safetensors.Write(&buf, tensors, first.Metadata()), "writing what Read accepted")
		second, err := read(buf.Bytes())
		require.NoError(t, err, "reading what Write wrote")
		require.Equal(t, first.Tensors(), second.Tensors())
		require.Equal(t, first.Metadata(), second.Metadata())
		for _, want := range tensors {
			got, err := second.Tensor(want.Name)
			require.NoError(t, err)
			require.Equal(t, want.DType, got.DType, want.Name)
			require.Equal(t, want.Shape, got.Shape, want.Name)
			require.Equal(t, want.Data, got.Data, want.Name)
		}
	})
}
