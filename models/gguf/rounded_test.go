package gguf_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/gguf"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
)

// TestRoundedMatchesReference rounds llama-tiny's checkpoint in memory
// through each type the reference writes a file of: every parameter's
// values are the reference file's, and in Q4_0 every decoder weight's
// WInt4 codes and scales too (nil for ffn_down, whose 172 inputs the file
// stores in F16).
func TestRoundedMatchesReference(t *testing.T) {
	cfg, ck := openTiny(t)
	for _, g := range goldenFiles {
		t.Run(g.file, func(t *testing.T) {
			l, err := gguf.OpenLlama(filepath.Join(ggufDir, g.file))
			require.NoError(t, err)
			defer func() { require.NoError(t, l.Close()) }()
			r, err := gguf.NewRounded(ck, g.typ)
			require.NoError(t, err)
			packed := 0
			for _, p := range cfg.Params() {
				want, err := l.Values(p)
				require.NoError(t, err)
				got, err := r.Values(p)
				require.NoError(t, err)
				require.Equal(t, want, got, p.Name)
				if len(p.Shape) != 2 {
					continue
				}
				wantCodes, wantScales, err := l.WInt4(p.Name, p.Shape[0], p.Shape[1])
				require.NoError(t, err)
				codes, scales, err := r.WInt4(p.Name, p.Shape[0], p.Shape[1])
				require.NoError(t, err)
				require.Equal(t, wantCodes, codes, p.Name)
				require.Equal(t, wantScales, scales, p.Name)
				if codes != nil {
					packed++
				}
			}
			if g.typ == gguf.Q4_0 {
				// Every 2-D tensor but the two ffn_down: the decoder
				// layers' other six modules, embed_tokens and lm_head.
				assert.Equal(t, 2*6+2, packed)
			} else {
				assert.Zero(t, packed)
			}
		})
	}
}

// TestLoadLlamaRounded loads llama-tiny rounded through Q4_0 with
// LoadLlama, as from the reference's Q4_0 file: the same modules on the
// weight-only int4 kernels and the same logits.
func TestLoadLlamaRounded(t *testing.T) {
	cfg, ck := openTiny(t)
	l, err := gguf.OpenLlama(filepath.Join(ggufDir, "model-q4_0.gguf"))
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	r, err := gguf.NewRounded(ck, gguf.Q4_0)
	require.NoError(t, err)
	be := cpu.New()
	ids := []int32{1, 17, 300, 42, 511, 3, 99, 250}
	var logits [][]float32
	for _, src := range []gguf.BlockSource{l, r} {
		m, err := gguf.LoadLlama(be, cfg, src, nn.F32)
		require.NoError(t, err)
		assert.True(t, m.Quantized())
		got, err := m.Forward(llama.Inputs{IDs: ids}, 1, len(ids))
		require.NoError(t, err)
		require.NoError(t, m.Close())
		logits = append(logits, got)
	}
	assert.Equal(t, logits[0], logits[1])
}

func TestNewRoundedErrors(t *testing.T) {
	_, ck := openTiny(t)
	for _, typ := range []gguf.Type{gguf.Q4_K, gguf.Q6_K, gguf.Q4_1} {
		_, err := gguf.NewRounded(ck, typ)
		require.ErrorIs(t, err, gguf.ErrUnsupported, typ.String())
		assert.True(t, strings.Contains(err.Error(), typ.String()), err.Error())
	}
	r, err := gguf.NewRounded(ck, gguf.Q4_0)
	require.NoError(t, err)
	_, err = r.Values(nn.Param{Name: "model.layers.9.mlp.up_proj.weight", Shape: []int{172, 64}})
	assert.ErrorIs(t, err, nn.ErrWeights)
	_, _, err = r.WInt4("model.layers.0.mlp.up_proj.weight", 64, 64)
	assert.ErrorIs(t, err, nn.ErrWeights, "a shape not the checkpoint's")
}
