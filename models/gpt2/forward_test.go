package gpt2_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/gpt2"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

// tinyCase returns the golden case of the tiny checkpoint without padding.
func tinyCase(t testing.TB) *goldenCase {
	t.Helper()
	for _, c := range loadCases(t) {
		if c.Name == "tiny" {
			return c
		}
	}
	t.Fatal("no golden case tiny")
	return nil
}

// tinyTensors returns the tensors of the tiny checkpoint, each passed
// through edit (which returns false to drop it).
func tinyTensors(t testing.TB, edit func(*safetensors.Tensor) bool) []safetensors.Tensor {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(tinyDir, "model.safetensors"))
	require.NoError(t, err)
	var out []safetensors.Tensor
	for _, n := range f.Tensors() {
		x, err := f.Tensor(n)
		require.NoError(t, err)
		x.Data, x.Shape = bytes.Clone(x.Data), append([]int(nil), x.Shape...)
		if edit(&x) {
			out = append(out, x)
		}
	}
	return out
}

// writeCheckpoint writes tensors to a new file and returns its path.
func writeCheckpoint(t testing.TB, tensors []safetensors.Tensor) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, tensors, map[string]string{"format": "pt"}))
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// TestCheckpointNames loads the tiny checkpoint under GPT2Model's bare
// names (the layout of openai-community/gpt2's file) and with a tied
// lm_head.weight, and gets the golden logits from each.
func TestCheckpointNames(t *testing.T) {
	c := tinyCase(t)
	cfg, _ := c.source(t)
	for name, edit := range map[string]func(*safetensors.Tensor) bool{
		"bare names": func(x *safetensors.Tensor) bool {
			x.Name = strings.TrimPrefix(x.Name, "transformer.")
			return true
		},
		"tied lm_head.weight": func(x *safetensors.Tensor) bool {
			if x.Name == "transformer.wte.weight" {
				x.Name = "lm_head.weight"
			}
			return true
		},
	} {
		t.Run(name, func(t *testing.T) {
			ts := tinyTensors(t, edit)
			if name == "tied lm_head.weight" { // the embeddings both as wte and lm_head
				ts = append(ts, tinyTensors(t, func(x *safetensors.Tensor) bool { return x.Name == "transformer.wte.weight" })...)
			}
			src, err := gpt2.OpenCheckpoint(writeCheckpoint(t, ts))
			require.NoError(t, err)
			m, err := gpt2.Load(cpu.New(), cfg, src, nn.F32)
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close()) }()
			rel, _ := c.relErr(run(t, m, c), cfg.VocabSize)
			assert.LessOrEqual(t, rel, 1e-4)
		})
	}
}

// TestCheckpointErrors checks that a checkpoint that does not fit the
// config is one error naming the tensor.
func TestCheckpointErrors(t *testing.T) {
	cfg, err := gpt2.LoadConfig(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		edit func(*safetensors.Tensor) bool
		want string
	}{
		{"missing tensor", func(x *safetensors.Tensor) bool { return x.Name != "transformer.h.1.mlp.c_fc.bias" },
			`missing tensor "transformer.h.1.mlp.c_fc.bias"`},
		{"nn.Linear layout", func(x *safetensors.Tensor) bool {
			if x.Name == "transformer.h.0.attn.c_attn.weight" {
				x.Shape = []int{192, 64}
			}
			return true
		}, `tensor "transformer.h.0.attn.c_attn.weight" has shape [192 64], the config wants [64 192]`},
		{"no embeddings", func(x *safetensors.Tensor) bool { return x.Name != "transformer.wte.weight" },
			`no tensor "wte.weight" or "transformer.wte.weight": not a GPT-2 checkpoint`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := gpt2.OpenCheckpoint(writeCheckpoint(t, tinyTensors(t, tc.edit)))
			if err == nil {
				var m *gpt2.Model
				if m, err = gpt2.Load(cpu.New(), cfg, src, nn.F32); err == nil {
					require.NoError(t, m.Close())
				}
			}
			require.ErrorIs(t, err, nn.ErrWeights)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	// A tensor the config has no place for: a third block's.
	extra := tinyTensors(t, func(x *safetensors.Tensor) bool { return true })
	x := extra[0]
	x.Name = "transformer.h.2.ln_1.bias"
	src, err := gpt2.OpenCheckpoint(writeCheckpoint(t, append(extra, x)))
	require.NoError(t, err)
	_, err = gpt2.Load(cpu.New(), cfg, src, nn.F32)
	require.ErrorIs(t, err, nn.ErrWeights)
	assert.ErrorContains(t, err, `tensor "transformer.h.2.ln_1.bias" is not used by the config`)

	_, err = gpt2.Load(cpu.New(), cfg, gpt2.Synthetic(1), nn.Mixed)
	assert.ErrorIs(t, err, kernels.ErrDType)
}

// TestInputErrors checks that bad inputs are one error naming them.
func TestInputErrors(t *testing.T) {
	cfg, err := gpt2.LoadConfig(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err)
	m, err := gpt2.Load(cpu.New(), cfg, gpt2.Synthetic(1), nn.F32)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	ids := func(v ...int32) nn.Values { return nn.Values{Shape: []int{1, len(v)}, I32: v} }
	r, err := m.NewRunner(map[string]nn.Values{"input_ids": ids(1, 2, 3)})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	for _, tc := range []struct {
		name string
		in   map[string]nn.Values
		want string
	}{
		{"outside the vocabulary", map[string]nn.Values{"input_ids": ids(1, 256, 3)},
			"input_ids[0, 1] = 256 is outside the vocabulary [0, 256)"},
		{"left padding", map[string]nn.Values{"input_ids": ids(1, 2, 3), "attention_mask": ids(0, 1, 1)},
			"attention_mask row 0 is not 1…1 0…0 (value 1 at 1; only right padding is supported)"},
		{"no token", map[string]nn.Values{"input_ids": ids(1, 2, 3), "attention_mask": ids(0, 0, 0)},
			"attention_mask row 0 has no tokens"},
		{"wrong shape", map[string]nn.Values{"input_ids": ids(1, 2)}, "input_ids has shape [1 2], want [1 3]"},
		{"unexpected input", map[string]nn.Values{"input_ids": ids(1, 2, 3), "token_type_ids": ids(0, 0, 0)},
			`unexpected input "token_type_ids" (want input_ids, optionally attention_mask)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Set(tc.in)
			require.ErrorIs(t, err, gpt2.ErrInput)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	_, err = m.NewRunner(map[string]nn.Values{"input_ids": {Shape: []int{1, 65}, I32: make([]int32, 65)}})
	require.ErrorIs(t, err, gpt2.ErrInput)
	assert.ErrorContains(t, err, "seq 65 exceeds n_positions 64")
	_, err = m.NewRunner(map[string]nn.Values{"input_ids": {Shape: []int{3}, I32: make([]int32, 3)}})
	require.ErrorIs(t, err, gpt2.ErrInput)
	assert.ErrorContains(t, err, "want [batch, seq]")
}
