package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
)

// Files written by testdata/reference/gpt2.py.
const (
	gpt2Tiny   = "../../testdata/golden/gpt2-tiny"
	gpt2Golden = "../../testdata/golden/gpt2.safetensors"
)

// TestInferGPT2Golden runs the tiny checkpoint directory on the golden
// right-padded batch in each dtype and compares the logits of every
// position with the reference's.
func TestInferGPT2Golden(t *testing.T) {
	f, err := safetensors.Open(gpt2Golden)
	require.NoError(t, err)
	var in []safetensors.Tensor
	for _, role := range gpt2InputNames {
		x, err := f.Tensor("tiny_right/" + role)
		require.NoError(t, err)
		x.Name = role
		in = append(in, x)
	}
	input := writeSafetensors(t, in)
	want, err := f.Tensor("tiny_right/logits")
	require.NoError(t, err)
	for _, tc := range []struct {
		dtype string
		tol   float64
	}{{"f32", 1e-4}, {"f16", 1e-2}, {"bf16", kernels.Tolerance(kernels.BF16)}} {
		t.Run(tc.dtype, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.safetensors")
			var stdout bytes.Buffer
			require.NoError(t, run([]string{"infer", "--model", "gpt2", "--weights", gpt2Tiny, "--input", input,
				"--output", out, "--dtype", tc.dtype}, &stdout, &bytes.Buffer{}))
			assert.Contains(t, stdout.String(), "gpt2")
			_, got := tensors(t, out)
			require.Len(t, got, 1)
			require.Equal(t, "logits", got[0].Name)
			require.Equal(t, want.Shape, got[0].Shape)
			rel, _ := kernels.RelErr(float64s(t, got[0]), float64s(t, want))
			t.Logf("rel-err %.3g", rel)
			assert.LessOrEqual(t, rel, tc.tol)
		})
	}
}

func TestInferGPT2Errors(t *testing.T) {
	left := writeSafetensors(t, []safetensors.Tensor{
		i32Tensor("input_ids", []int32{1, 2, 3}, 1, 3), i32Tensor("attention_mask", []int32{0, 1, 1}, 1, 3)})
	extra := writeSafetensors(t, []safetensors.Tensor{
		i32Tensor("input_ids", []int32{1}, 1, 1), i32Tensor("token_type_ids", []int32{0}, 1, 1)})
	for _, tc := range []struct {
		name, input, dtype, want string
		code                     int
	}{
		{"left padding", left, "f32", "only right padding is supported", 1},
		{"unexpected tensor", extra, "f32", `unexpected tensor "token_type_ids" (want input_ids, attention_mask)`, 1},
		{"dtype", left, "mixed", `unknown --dtype "mixed" for gpt2 (want f32, f16, bf16)`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run([]string{"infer", "--model", "gpt2", "--weights", gpt2Tiny, "--input", tc.input,
				"--output", filepath.Join(t.TempDir(), "o.safetensors"), "--dtype", tc.dtype}, &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.want)
			assert.Equal(t, tc.code, exitCode(err))
		})
	}
}
