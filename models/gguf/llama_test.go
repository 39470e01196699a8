package gguf_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/gguf"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/models/tokenizer"
)

// The goldens of testdata/reference/gguf.py: llama-tiny in each type.
const (
	goldenScript = "testdata/reference/gguf.py"
	tinyDir      = "../../testdata/golden/llama-tiny"
	ggufDir      = "../../testdata/golden/llama-tiny-gguf"
	llamaGolden  = "../../testdata/golden/llama.safetensors"
)

// goldenFiles are the reference's files with the type of their 2-D
// tensors, their alignment and the bounds this package holds them to:
// maxW bounds |dequantized − checkpoint| / the checkpoint's largest |value|
// in each 2-D tensor (the format's step: 2⁻¹¹ for F16's rounding, half a
// step of amax/127 for Q8_0, a whole step of amax/8 for Q4_0, whose
// codes reach −8·d on the side of the block's largest value and only 7·d
// on the other, plus the f16 scale's rounding), and logitTol bounds ‖logits − golden‖/‖golden‖ of the tiny
// case in float32 (F32: the checkpoint's own bound; the quantized files
// by their measured error with about 2× headroom, see docs/gguf.md).
var goldenFiles = []struct {
	file      string
	typ       gguf.Type
	alignment int
	maxW      float64
	logitTol  float64
}{
	{"model-f32.gguf", gguf.F32, 32, 0, 1e-4},
	{"model-f16.gguf", gguf.F16, 64, 1.0 / 2048, 1e-3},
	{"model-q8_0.gguf", gguf.Q8_0, 32, 0.5/127 + 1.0/2048, 1.5e-2},
	{"model-q4_0.gguf", gguf.Q4_0, 32, 1.0/8 + 1.0/2048, 2.5e-1},
}

func openTiny(t *testing.T) (llama.Config, *nn.Checkpoint) {
	t.Helper()
	cfg, err := llama.LoadConfig(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err)
	ck, err := llama.OpenCheckpoint(filepath.Join(tinyDir, "model.safetensors"))
	require.NoError(t, err)
	return cfg, ck
}

// TestGoldenTensors reads each reference file and checks its config,
// its layout and every dequantized tensor against the float checkpoint:
// F32 bit for bit, the others within the format's bound.
func TestGoldenTensors(t *testing.T) {
	cfg, ck := openTiny(t)
	for _, g := range goldenFiles {
		t.Run(g.file, func(t *testing.T) {
			l, err := gguf.OpenLlama(filepath.Join(ggufDir, g.file))
			require.NoError(t, err, "regenerate with /usr/bin/python3 %s", goldenScript)
			defer func() { require.NoError(t, l.Close()) }()
			assert.Equal(t, g.alignment, l.File.Alignment())
			want := cfg
			want.TorchDType = l.Config.TorchDType
			assert.Equal(t, want, l.Config)
			for _, p := range cfg.Params() {
				tt, ok := l.Tensor(p.Name)
				require.True(t, ok, p.Name)
				if len(p.Shape) == 1 {
					assert.Equal(t, gguf.F32, tt.Type, p.Name)
				} else {
					assert.Equal(t, gguf.StorageType(p.Shape, g.typ), tt.Type, p.Name)
				}
				got, err := l.Values(p)
				require.NoError(t, err)
				ref, err := ck.Values(p)
				require.NoError(t, err)
				if tt.Type == gguf.F32 {
					require.Equal(t, ref, got, p.Name)
					continue
				}
				var amax, worst float64
				for i := range ref {
					amax = max(amax, math.Abs(float64(ref[i])))
					worst = max(worst, math.Abs(float64(got[i]-ref[i])))
				}
				bound := g.maxW
				if tt.Type == gguf.F16 {
					bound = 1.0 / 2048
				}
				assert.LessOrEqual(t, worst/amax, bound, "%s (%s)", p.Name, tt.Type)
			}
		})
	}
}

// TestGoldenLogits runs the tiny golden case from each file: F32 gives
// the checkpoint's logits exactly, the quantized files stay within their
// bounds of the float64 reference.
func TestGoldenLogits(t *testing.T) {
	f, err := safetensors.Open(llamaGolden)
	require.NoError(t, err, "regenerate with /usr/bin/python3 testdata/reference/llama.py")
	idsT, err := f.Tensor("tiny/input_ids")
	require.NoError(t, err)
	ids, err := idsT.Int32()
	require.NoError(t, err)
	wantT, err := f.Tensor("tiny/logits")
	require.NoError(t, err)
	want, err := wantT.Float32()
	require.NoError(t, err)
	require.Len(t, wantT.Shape, 3)
	batch, seq := wantT.Shape[0], wantT.Shape[1]

	cfg, ck := openTiny(t)
	be := cpu.New()
	base, err := llama.Load(be, cfg, ck, nn.F32)
	require.NoError(t, err)
	defer func() { require.NoError(t, base.Close()) }()
	baseLogits, err := base.Forward(llama.Inputs{IDs: ids}, batch, seq)
	require.NoError(t, err)

	for _, g := range goldenFiles {
		t.Run(g.file, func(t *testing.T) {
			l, err := gguf.OpenLlama(filepath.Join(ggufDir, g.file))
			require.NoError(t, err)
			defer func() { require.NoError(t, l.Close()) }()
			m, err := llama.Load(be, l.Config, l, nn.F32)
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close()) }()
			got, err := m.Forward(llama.Inputs{IDs: ids}, batch, seq)
			require.NoError(t, err)
			if g.typ == gguf.F32 {
				require.Equal(t, baseLogits, got, "F32 GGUF logits differ from the checkpoint's")
			}
			rel, _ := kernels.RelErr(widen(got), widen(want))
			t.Logf("%s: rel-err %.3g", g.file, rel)
			assert.LessOrEqual(t, rel, g.logitTol)
		})
	}
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestGoldenTokenizer checks that the embedded tokenizer encodes and
// decodes as the tiny checkpoint's tokenizer.model does.
func TestGoldenTokenizer(t *testing.T) {
	ref, err := tokenizer.Load(filepath.Join(tinyDir, "tokenizer.model"))
	require.NoError(t, err)
	f, err := gguf.Open(filepath.Join(ggufDir, "model-q8_0.gguf"))
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	v, err := f.Vocab()
	require.NoError(t, err)
	assert.Equal(t, "llama", v.Model)
	assert.Equal(t, []int{1, 2, 0, -1}, []int{v.BOS, v.EOS, v.UNK, v.PAD})
	assert.True(t, v.AddBOS)
	assert.False(t, v.AddEOS)
	tok, err := f.Tokenizer()
	require.NoError(t, err)
	assert.Equal(t, ref.VocabSize(), tok.VocabSize())
	assert.Equal(t, ref.BOS(), tok.BOS())
	assert.Equal(t, ref.EOS(), tok.EOS())
	texts := []string{
		"", "Hello world", "  leading and   inner  spaces ", "zbench measures ML workloads: 1024³ matmul in 0.013 ms?",
		"unicode: naïve café — 東京 🚀", "tabs\tand\nnewlines\r\n", "<s> not special </s>",
	}
	for _, text := range texts {
		for _, special := range []bool{true, false} {
			want := ref.Encode(text, special)
			got := tok.Encode(text, special)
			require.Equal(t, want, got, "%q", text)
			wd, err := ref.Decode(want)
			require.NoError(t, err)
			gd, err := tok.Decode(got)
			require.NoError(t, err)
			assert.Equal(t, wd, gd, "%q", text)
		}
	}
	// And the same pieces come back out of it.
	rp, err := ref.Pieces()
	require.NoError(t, err)
	gp, err := tok.Pieces()
	require.NoError(t, err)
	assert.Equal(t, rp, gp)
}

// TestWriteLlamaMatchesReference writes llama-tiny with WriteLlama in each
// type the reference writes with the default alignment: the bytes are the
// reference's (the same metadata in the same order, the same quantizers),
// and reading them back gives the values Quantize's definition gives.
func TestWriteLlamaMatchesReference(t *testing.T) {
	cfg, ck := openTiny(t)
	tok, err := tokenizer.Load(filepath.Join(tinyDir, "tokenizer.model"))
	require.NoError(t, err)
	for _, g := range goldenFiles {
		if g.alignment != gguf.DefaultAlignment {
			continue
		}
		t.Run(g.file, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, gguf.WriteLlama(&buf, "zbench llama-tiny", cfg, ck, tok, g.typ))
			want, err := os.ReadFile(filepath.Join(ggufDir, g.file))
			require.NoError(t, err)
			require.Equal(t, len(want), buf.Len())
			require.True(t, bytes.Equal(want, buf.Bytes()), "the written file differs from the reference's")

			f, err := gguf.Parse("written", buf.Bytes())
			require.NoError(t, err)
			l, err := gguf.NewLlama(f)
			require.NoError(t, err)
			for _, p := range cfg.Params() {
				ref, err := ck.Values(p)
				require.NoError(t, err)
				st := gguf.StorageType(p.Shape, g.typ)
				q, err := gguf.Quantize(st, ref)
				require.NoError(t, err)
				deq := make([]float32, len(ref))
				require.NoError(t, gguf.Dequantize(st, deq, q))
				got, err := l.Values(p)
				require.NoError(t, err)
				require.Equal(t, deq, got, p.Name)
			}
		})
	}
}

// TestWeightOnlyRepack loads the Q4_0 and Q8_0 files with their blocks
// repacked for the weight-only int4 and int8 kernels (groups of 32): the
// same weights, so the logits are the dequantized model's up to float32
// summation order, and the step reads the codes' bytes.
func TestWeightOnlyRepack(t *testing.T) {
	for _, c := range []struct {
		file   string
		format kernels.WeightFormat
		packed func(l *gguf.Llama) func(string, int, int) ([]byte, []float32, error)
		bytes  float64 // of the float model's decode step, at most
	}{
		{"model-q4_0.gguf", kernels.WInt4, func(l *gguf.Llama) func(string, int, int) ([]byte, []float32, error) { return l.WInt4 }, 1.0 / 4},
		{"model-q8_0.gguf", kernels.WInt8, func(l *gguf.Llama) func(string, int, int) ([]byte, []float32, error) { return l.WInt8 }, 1.0 / 2},
	} {
		t.Run(c.file, func(t *testing.T) {
			l, err := gguf.OpenLlama(filepath.Join(ggufDir, c.file))
			require.NoError(t, err)
			defer func() { require.NoError(t, l.Close()) }()
			be := cpu.New()
			float, err := llama.Load(be, l.Config, l, nn.F32)
			require.NoError(t, err)
			defer func() { require.NoError(t, float.Close()) }()
			packed, err := llama.Load(be, l.Config, l, nn.F32)
			require.NoError(t, err)
			defer func() { require.NoError(t, packed.Close()) }()
			n, err := packed.SetWeightOnly(c.format, 32, c.packed(l))
			require.NoError(t, err)
			// Every module but ffn_down (172 inputs, stored F16) in both
			// layers, and lm_head (output.weight, in the file's type).
			assert.Equal(t, 2*6+1, n)
			require.True(t, packed.Quantized())
			assert.Less(t, packed.DecodeWork(1, 8).Bytes, float.DecodeWork(1, 8).Bytes*c.bytes)

			ids := []int32{1, 17, 300, 42, 511, 3, 99, 250}
			want, err := float.Forward(llama.Inputs{IDs: ids}, 1, len(ids))
			require.NoError(t, err)
			got, err := packed.Forward(llama.Inputs{IDs: ids}, 1, len(ids))
			require.NoError(t, err)
			rel, _ := kernels.RelErr(widen(got), widen(want))
			t.Logf("rel-err %.3g", rel)
			assert.LessOrEqual(t, rel, 1e-5)
			_, err = packed.SetWeightOnly(c.format, 32, c.packed(l))
			assert.ErrorIs(t, err, llama.ErrInput)
		})
	}
}
