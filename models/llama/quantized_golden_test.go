package llama

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

// quantGoldenDir holds the quantized checkpoints and their logits that
// testdata/reference/llama_quant.py writes (make golden): tiny Llamas
// quantized with compressed-tensors' own scale rule (amax/127.5 in
// [-128, 127], amax/7.5 in [-8, 7]) and stored in its layouts, so that
// the loader reads checkpoints our writer did not make.
const quantGoldenDir = "../../testdata/golden/llama-quant"

// TestQuantizedGolden loads each reference checkpoint with its
// config.json, runs the forward on the CPU in float32 and compares the
// logits with the reference's, computed in float64 from the dequantized
// weights (and, for w8a8, inputs fake-quantized per token as our kernels
// quantize them).
func TestQuantizedGolden(t *testing.T) {
	golden, err := safetensors.Open(filepath.Join(quantGoldenDir, "logits.safetensors"))
	require.NoError(t, err, "regenerate with /usr/bin/python3 testdata/reference/llama_quant.py")
	require.Equal(t, "testdata/reference/llama_quant.py", golden.Metadata()["script"])
	idsT, err := golden.Tensor("input_ids")
	require.NoError(t, err)
	ids, err := idsT.Int32()
	require.NoError(t, err)
	require.Len(t, ids, 10)

	cases := []struct {
		scheme     string
		want       quant.Spec
		floatDType string // embeddings, norms and lm_head
		scaleDType string
		// tol bounds ‖got−want‖/‖want‖. Measured on amd64 (AVX-512
		// VNNI) under the purego, openblas and onednn engines and with
		// -tags purego: w8a8 1.2e-7 to 1.7e-7, w8a16 2.3e-7 to 2.9e-7,
		// w4a16 2.7e-7 to 3.0e-7: float32 rounding of the same
		// dequantized weights. w8a8 rounds its inputs as the reference
		// does because the reference chose ids whose inputs all lie
		// 2.2e-4 code units or more from a rounding midpoint, three
		// times float32's deviation (the metadata's "closest_tie" and
		// "float32_deviation"). What a wrong reading costs, measured
		// once with the reference's functions: one input code off by
		// one, about 1e-3; -128 (-8) read as -127 (-7) 8.3e-3 (w8a8),
		// 2.2e-3 (w8a16), 5.1e-2 (w4a16); the scales off by 127.5/127
		// (7.5/7) 5.5e-3 or more.
		tol float64
	}{
		{"w8a8", quant.Spec{Scheme: quant.W8A8, Dynamic: true, Ignore: []string{"lm_head"}}, "BF16", "BF16", 1e-5},
		{"w8a16", quant.Spec{Scheme: quant.W8A16, Ignore: []string{"lm_head"}}, "F16", "F16", 1e-5},
		{"w4a16", quant.Spec{Scheme: quant.W4A16, Group: 32, Ignore: []string{"lm_head"}}, "F32", "F32", 1e-5},
	}
	for _, c := range cases {
		t.Run(c.scheme, func(t *testing.T) {
			dir := filepath.Join(quantGoldenDir, c.scheme)
			cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
			require.NoError(t, err)
			require.NotNil(t, cfg.Quant, "quantization_config")
			require.Equal(t, c.want, *cfg.Quant)

			path := filepath.Join(dir, "model.safetensors")
			checkGoldenLayout(t, path, cfg, c.floatDType, c.scaleDType)

			ck, err := OpenCheckpoint([]string{path})
			require.NoError(t, err)
			m, err := Load(cpu.New(), cfg, ck, nn.F32)
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close()) }()
			require.True(t, m.Quantized())
			got, err := m.Forward(Inputs{IDs: ids}, 1, len(ids))
			require.NoError(t, err)

			wantT, err := golden.Tensor(c.scheme + "/logits")
			require.NoError(t, err)
			require.Equal(t, []int{len(ids), cfg.VocabSize}, wantT.Shape)
			want, err := wantT.Float32()
			require.NoError(t, err)
			r := rel(t, got, want)
			var maxAbs float64
			for i := range got {
				maxAbs = math.Max(maxAbs, math.Abs(float64(got[i])-float64(want[i])))
			}
			t.Logf("%s: rel-err %.3g, max-abs %.3g", c.scheme, r, maxAbs)
			assert.Less(t, r, c.tol, "rel-err of the logits")
		})
	}
}

// checkGoldenLayout checks that the checkpoint at path is in
// compressed-tensors' layout for cfg's scheme, with the float tensors and
// scales in the given dtypes and weight_shape I64, and that its codes
// reach the most negative one (-128, -8), which compressed-tensors'
// amax/127.5 and amax/7.5 give and our own quantizer never does.
func checkGoldenLayout(t *testing.T, path string, cfg Config, floatDType, scaleDType string) {
	t.Helper()
	f, err := safetensors.Open(path)
	require.NoError(t, err)
	_, weightOnly := cfg.Quant.Scheme.WeightOnly()
	bits := 8
	if cfg.Quant.Scheme == quant.W4A16 {
		bits = 4
	}
	float, _ := cfg.floatParams()
	for _, p := range float {
		tt, err := f.Tensor(p.Name)
		require.NoError(t, err)
		assert.Equal(t, floatDType, tt.DType, p.Name)
	}
	counts := map[int]int{}
	for _, n := range cfg.moduleNames() {
		scale, err := f.Tensor(n + ".weight_scale")
		require.NoError(t, err)
		assert.Equal(t, scaleDType, scale.DType, n)
		_, err = f.Tensor(n + ".input_scale")
		require.ErrorIs(t, err, safetensors.ErrNotFound, "a dynamic scheme has no input_scale")
		if !weightOnly {
			w, err := f.Tensor(n + ".weight")
			require.NoError(t, err)
			require.Equal(t, "I8", w.DType, n)
			for _, b := range w.Data {
				counts[int(int8(b))]++
			}
			continue
		}
		shape, err := f.Tensor(n + ".weight_shape")
		require.NoError(t, err)
		assert.Equal(t, "I64", shape.DType, n)
		packed, err := f.Tensor(n + ".weight_packed")
		require.NoError(t, err)
		require.Equal(t, "I32", packed.DType, n)
		for i := 0; i < len(packed.Data); i += 4 {
			word := binary.LittleEndian.Uint32(packed.Data[i:])
			for s := 0; s < 32; s += bits {
				counts[int(word>>s&(1<<bits-1))-1<<(bits-1)]++
			}
		}
	}
	lo, hi := -1<<(bits-1), 1<<(bits-1)-1
	assert.Positive(t, counts[lo], "no weight code of %d: the checkpoint does not exercise the full range", lo)
	assert.Positive(t, counts[hi], "no weight code of %d", hi)
	t.Logf("%s: %d of %d codes are %d", strings.TrimPrefix(path, quantGoldenDir+"/"), counts[lo], sum(counts), lo)
}

// sum is the total of counts.
func sum(counts map[int]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
