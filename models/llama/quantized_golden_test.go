package llama

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

// quantGoldenDir holds the quantized checkpoints and their logits that
// testdata/reference/llama_quant.py writes (make golden): tiny Llamas
// quantized with compressed-tensors' own scale rule (amax/127.5 in
// [-128, 127], amax/7.5 in [-8, 7], amax/448 for FP8 E4M3) and stored in
// its layouts, and one in bitsandbytes' NF4 layout as transformers saves
// it, so that the loader reads checkpoints our writer did not make.
const quantGoldenDir = "../../testdata/golden/llama-quant"

// TestQuantizedGolden loads each reference checkpoint with its
// config.json, runs the forward on the CPU in float32 and compares the
// logits with the reference's, computed in float64 from the dequantized
// weights (and, for w8a8, inputs fake-quantized per token as our kernels
// quantize them; for fp8, cast to E4M3 per token as CastFP8Rows casts
// them).
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
		// (7.5/7) 5.5e-3 or more. nf4: 2.6e-7 to 2.9e-7 (default, purego);
		// its nibbles read in the wrong order cost 1.3, code 15 read as
		// 14 (0 as 1) 0.21 (0.22), measured likewise. fp8: 1.2e-7 to
		// 1.8e-7 (purego, openblas, onednn, -tags purego); the inputs
		// left unquantized cost 4.3e-2, the scales one bfloat16 ulp
		// high 2.7e-2, measured likewise.
		tol float64
	}{
		{"w8a8", quant.Spec{Scheme: quant.W8A8, Dynamic: true, Ignore: []string{"lm_head"}}, "BF16", "BF16", 1e-5},
		{"w8a16", quant.Spec{Scheme: quant.W8A16, Ignore: []string{"lm_head"}}, "F16", "F16", 1e-5},
		{"w4a16", quant.Spec{Scheme: quant.W4A16, Group: 32, Ignore: []string{"lm_head"}}, "F32", "F32", 1e-5},
		// bitsandbytes' NF4 as transformers saves it (its own config,
		// intermediate 128, so that every in_features is a multiple of
		// the blocksize 64), llm_int8_skip_modules null.
		{"nf4", quant.Spec{Scheme: quant.NF4}, "BF16", "F32", 1e-5},
		// llm-compressor's FP8_DYNAMIC ("float-quantized"): E4M3
		// weights with BF16 scales amax/448 per channel, inputs cast
		// to E4M3 per token (CastFP8Rows). Its own ids (fp8/input_ids),
		// whose E4M3 inputs lie 4.3e-4 units (1 + |y|/128 of the value
		// y = x·s cast) or more from a rounding midpoint, 4.5 times
		// float32's deviation (the metadata's "closest_tie",
		// "float32_deviation").
		{"fp8", quant.Spec{Scheme: quant.FP8, Dynamic: true, Ignore: []string{"lm_head"}}, "BF16", "BF16", 1e-6},
	}
	for _, c := range cases {
		t.Run(c.scheme, func(t *testing.T) {
			ids := ids
			if own, err := golden.Tensor(c.scheme + "/input_ids"); err == nil {
				ids, err = own.Int32()
				require.NoError(t, err)
				require.Len(t, ids, 10)
			}
			dir := filepath.Join(quantGoldenDir, c.scheme)
			cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
			require.NoError(t, err)
			require.NotNil(t, cfg.Quant, "quantization_config")
			require.Equal(t, c.want, *cfg.Quant)

			path := filepath.Join(dir, "model.safetensors")
			if c.want.Scheme == quant.NF4 {
				checkNF4Layout(t, path, cfg, c.floatDType)
			} else {
				checkGoldenLayout(t, path, cfg, c.floatDType, c.scaleDType)
			}

			ck, err := OpenCheckpoint(path)
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
// amax/127.5 and amax/7.5 give and our own quantizer never does; for fp8,
// weights F8_E4M3 holding ±448 (0x7e, 0xfe) and no NaN.
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
		if cfg.Quant.Scheme == quant.FP8 {
			w, err := f.Tensor(n + ".weight")
			require.NoError(t, err)
			require.Equal(t, "F8_E4M3", w.DType, n)
			for _, b := range w.Data {
				counts[int(b)]++
			}
			continue
		}
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
	if cfg.Quant.Scheme == quant.FP8 {
		// ±448 (0x7e, 0xfe): each row's amax, w/scale rounding to 448 or
		// past it; no NaN (0x7f, 0xff).
		assert.Positive(t, counts[0x7e], "no weight code 0x7e (448)")
		assert.Positive(t, counts[0xfe], "no weight code 0xfe (-448)")
		assert.Zero(t, counts[0x7f]+counts[0xff], "NaN weight codes")
		t.Logf("%s: %d and %d of %d codes are ±448", strings.TrimPrefix(path, quantGoldenDir+"/"), counts[0x7e], counts[0xfe], sum(counts))
		return
	}
	lo, hi := -1<<(bits-1), 1<<(bits-1)-1
	assert.Positive(t, counts[lo], "no weight code of %d: the checkpoint does not exercise the full range", lo)
	assert.Positive(t, counts[hi], "no weight code of %d", hi)
	t.Logf("%s: %d of %d codes are %d", strings.TrimPrefix(path, quantGoldenDir+"/"), counts[lo], sum(counts), lo)
}

// checkNF4Layout checks that the checkpoint at path is in bitsandbytes'
// layout (quant.NF4) as transformers saves it, with the float tensors in
// floatDType: per module X.weight U8 [out·in/2, 1], X.weight.absmax F32,
// X.weight.quant_map F32 holding NF4's levels, and the quant_state JSON
// exactly as Python's json.dumps writes it; and that codes 0 (−1) and 15
// (+1) occur in both the high and the low nibbles, so that reading the
// nibbles in the wrong order or mistaking a level would show.
func checkNF4Layout(t *testing.T, path string, cfg Config, floatDType string) {
	t.Helper()
	f, err := safetensors.Open(path)
	require.NoError(t, err)
	float, mods := cfg.floatParams()
	for _, p := range float {
		tt, err := f.Tensor(p.Name)
		require.NoError(t, err)
		assert.Equal(t, floatDType, tt.DType, p.Name)
	}
	var high, low [16]int
	for _, n := range cfg.moduleNames() {
		out, in := mods[n][0], mods[n][1]
		w, err := f.Tensor(n + ".weight")
		require.NoError(t, err)
		require.Equal(t, "U8", w.DType, n)
		require.Equal(t, []int{out * in / 2, 1}, w.Shape, n)
		for _, b := range w.Data {
			high[b>>4]++
			low[b&0xf]++
		}
		absmax, err := f.Tensor(n + ".weight.absmax")
		require.NoError(t, err)
		assert.Equal(t, "F32", absmax.DType, n)
		assert.Equal(t, []int{out * in / 64}, absmax.Shape, n)
		qmap, err := f.Tensor(n + ".weight.quant_map")
		require.NoError(t, err)
		assert.Equal(t, "F32", qmap.DType, n)
		levels, err := qmap.Float32()
		require.NoError(t, err)
		assert.Equal(t, kernels.NF4Levels[:], levels, n)
		st, err := f.Tensor(n + ".weight.quant_state.bitsandbytes__nf4")
		require.NoError(t, err)
		assert.Equal(t, "U8", st.DType, n)
		assert.Equal(t, fmt.Sprintf(`{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [%d, %d]}`, out, in), string(st.Data), n)
		_, err = f.Tensor(n + ".weight_scale")
		require.ErrorIs(t, err, safetensors.ErrNotFound)
	}
	for _, c := range []int{0, 15} {
		assert.Positive(t, high[c], "no code %d in a high nibble", c)
		assert.Positive(t, low[c], "no code %d in a low nibble", c)
	}
	t.Logf("nf4/model.safetensors: codes 0 and 15: %d and %d in high nibbles, %d and %d in low ones", high[0], high[15], low[0], low[15])
}

// sum is the total of counts.
func sum(counts map[int]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
