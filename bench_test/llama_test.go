package bench_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/gguf"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/zbench"
)

// Files written by testdata/reference/llama.py (make golden).
const (
	llamaGolden         = "../testdata/golden/llama.safetensors"
	llamaGenerateGolden = "../testdata/golden/llama-generate.safetensors"
	llamaTinyDir        = "../testdata/golden/llama-tiny"
	// llamaSeed seeds the synthetic TinyLlama weights of the golden's
	// tinyllama case and of the benchmarks.
	llamaSeed = 20261125
)

// llamaCase is one case of the Llama logits golden.
type llamaCase struct {
	Name    string
	Config  json.RawMessage `json:"config"` // an HF config.json dict
	Weights string          `json:"weights"`
	Seed    uint64          `json:"seed"`
	Padding string          `json:"padding"`
	// GGUFType, when set, is the GGUF type every weight is rounded
	// through as a file of that type holds it (gguf.Rounded): the case is
	// that model's.
	GGUFType string `json:"gguf_type"`

	Batch, Seq int
	In         llama.Inputs
	Logits     []float32 // [B, S, V]
}

// loadLlamaCases reads every case of the Llama logits golden.
func loadLlamaCases() ([]*llamaCase, error) {
	f, err := safetensors.Open(llamaGolden)
	if err != nil {
		return nil, err
	}
	var cases []*llamaCase
	for key, val := range f.Metadata() {
		if key == "format" || key == "reference" || key == "script" {
			continue
		}
		c := &llamaCase{Name: key}
		if err := json.Unmarshal([]byte(val), c); err != nil {
			return nil, fmt.Errorf("%s: case %s: %w", llamaGolden, key, err)
		}
		var shape []int
		if c.In.IDs, shape, err = int32s(f, key+"/input_ids"); err != nil {
			return nil, err
		}
		if len(shape) != 2 {
			return nil, fmt.Errorf("%s: %s/input_ids has shape %v, want [batch, seq]", llamaGolden, key, shape)
		}
		c.Batch, c.Seq = shape[0], shape[1]
		if c.In.Mask, _, err = int32s(f, key+"/attention_mask"); err != nil {
			return nil, err
		}
		if c.Logits, err = float32s(f, key+"/logits"); err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no cases", llamaGolden)
	}
	return cases, nil
}

// source returns the case's config and weights (rounded through its
// GGUF type, where it has one).
func (c *llamaCase) source() (llama.Config, nn.Source, error) {
	cfg, err := llama.ParseConfig(c.Name+" config", c.Config)
	if err != nil {
		return cfg, nil, err
	}
	var src nn.Source
	if c.Weights == "synthetic" {
		src = llama.Synthetic(c.Seed)
	} else if src, err = llama.OpenCheckpoint(filepath.Join("..", c.Weights, "model.safetensors")); err != nil {
		return cfg, nil, err
	}
	if c.GGUFType == "" {
		return cfg, src, nil
	}
	t, err := gguf.ParseType(c.GGUFType)
	if err != nil {
		return cfg, nil, fmt.Errorf("%s: case %s: gguf_type: %w", llamaGolden, c.Name, err)
	}
	r, err := gguf.NewRounded(src, t)
	return cfg, r, err
}

// load loads the case's model on dev in precision p: with a GGUF type,
// as gguf.LoadLlama loads that file (Q4_0 weights on the weight-only int4
// kernels where dev has them).
func (c *llamaCase) load(dev kernels.Backend, p nn.Precision) (*llama.Model, error) {
	cfg, src, err := c.source()
	if err != nil {
		return nil, err
	}
	if r, ok := src.(*gguf.Rounded); ok {
		return gguf.LoadLlama(dev, cfg, r, p)
	}
	return llama.Load(dev, cfg, src, p)
}

// deep reports whether the case is TinyLlama-1.1B's shape (tinyllama, and
// tinyllama_q4_0 of the same weights rounded through GGUF Q4_0).
func (c *llamaCase) deep() bool { return strings.HasPrefix(c.Name, "tinyllama") }

// relErr compares the logits of the real (mask 1) positions.
func (c *llamaCase) relErr(got []float32, vocab int) float64 {
	var g, w []float64
	for i := range c.Batch * c.Seq {
		if c.In.Mask != nil && c.In.Mask[i] == 0 {
			continue
		}
		g = append(g, widen(got[i*vocab:(i+1)*vocab])...)
		w = append(w, widen(c.Logits[i*vocab:(i+1)*vocab])...)
	}
	rel, _ := kernels.RelErr(g, w)
	return rel
}

// llamaPrecisions are the precisions a Llama model runs in, with the
// relative error of its logits against the float64 reference (as BERT's:
// the kernels' bf16 tolerance, 1.6e-2, which the 2-layer cases meet).
var llamaPrecisions = []struct {
	p   nn.Precision
	tol float64
}{{nn.F32, 1e-4}, {nn.F16, 1e-2}, {nn.BF16, kernels.Tolerance(kernels.BF16)}}

// deepBF16Tolerance is the bf16 tolerance of TinyLlama-1.1B's 22 layers
// (deepModels says why), the bound its benchmarks report.
var deepBF16Tolerance = benchTolerance("BenchmarkLlamaDecode/model=tinyllama", "bf16")

// deepQ4_0Tolerance is the bound of TinyLlama-1.1B's GGUF Q4_0 model in
// float32 against the golden of the same rounded weights (deepModels says
// why), the bound its w4a16 benchmarks report.
var deepQ4_0Tolerance = benchTolerance("BenchmarkLlamaDecode/model=tinyllama", "w4a16")

// decoders are the devices that run decoder-only models.
func decoders() []kernels.Backend { return devicesWith[kernels.Decoder]() }

// TestLlamaGolden runs every logits case — the tiny checkpoint with and
// without padding, GQA with llama3 rope scaling, linear scaling, and
// TinyLlama-1.1B's shape with synthetic weights, as they are and as the
// GGUF Q4_0 model (its decoder weights on the weight-only int4 kernels
// against the golden of the same rounded weights) — on every device in
// every precision (TinyLlama not in -short mode, and on the CPU in f32
// only).
func TestLlamaGolden(t *testing.T) {
	cases, err := loadLlamaCases()
	require.NoError(t, err)
	devs := decoders()
	require.NotEmpty(t, devs, "no device implements the decoder ops")
	for _, dev := range devs {
		for _, c := range cases {
			for _, pr := range llamaPrecisions {
				// TinyLlama's 1.1 B weights: f32 only on the CPU (bf16
				// there is the benchmarks' check), never in -short mode.
				if c.deep() && (testing.Short() || (pr.p != nn.F32 && dev.Name() == "cpu")) {
					continue
				}
				tol := pr.tol
				switch {
				case c.deep() && pr.p == nn.BF16:
					tol = deepBF16Tolerance
				case c.GGUFType == "Q4_0" && pr.p == nn.F32:
					tol = deepQ4_0Tolerance
				}
				t.Run(fmt.Sprintf("dev=%s/%s/%v", dev.Name(), c.Name, pr.p), func(t *testing.T) {
					m, err := c.load(dev, pr.p)
					require.NoError(t, err)
					defer func() { require.NoError(t, m.Close()) }()
					logits, err := m.Forward(c.In, c.Batch, c.Seq)
					require.NoError(t, err)
					rel := c.relErr(logits, m.Config.VocabSize)
					t.Logf("rel-err logits %.3g", rel)
					assert.LessOrEqual(t, rel, tol)
				})
			}
		}
	}
}

// The bounds of the int8 model's logits (W8A8 dynamic, llama.Model.
// Quantize) against the float64 reference. Measured on the CPU (float32
// around the int8 products): 8.5e-3 to 1.0e-2 on the 2-layer cases, and
// 1.26e-1 on TinyLlama-1.1B's 22 layers of synthetic weights, whose error
// grows with depth as bfloat16's does, three times as large
// (deepModels has the figures). GPUs' float16 around the
// products adds about 1e-3.
const llamaInt8Tolerance = 2.5e-2

// deepInt8Tolerance is TinyLlama-1.1B's int8 bound, the one its
// benchmarks report.
var deepInt8Tolerance = benchTolerance("BenchmarkLlamaDecode/model=tinyllama", "int8")

// llamaInt8Tol is the int8 bound of the named golden case.
func llamaInt8Tol(golden string) float64 {
	if golden == "tinyllama" {
		return deepInt8Tolerance
	}
	return llamaInt8Tolerance
}

// quantDecoders are the devices that run decoder-only models in int8.
func quantDecoders() []kernels.Backend {
	var out []kernels.Backend
	for _, d := range decoders() {
		if _, err := kernels.Group[kernels.Quant](d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// llamaInt8Precision is the precision around an int8 model's products on
// dev: float32 on CPUs, float16 on GPUs.
func llamaInt8Precision(dev kernels.Backend) nn.Precision {
	if dev.Info().Kind == kernels.GPU {
		return nn.F16
	}
	return nn.F32
}

// int8Llama loads cfg's weights from src on dev in llamaInt8Precision
// and quantizes the model.
func int8Llama(dev kernels.Backend, cfg llama.Config, src nn.Source) (*llama.Model, []quant.LinearReport, error) {
	m, err := llama.Load(dev, cfg, src, llamaInt8Precision(dev))
	if err != nil {
		return nil, nil, err
	}
	rep, err := m.Quantize()
	if err != nil {
		return nil, nil, errors.Join(err, m.Close())
	}
	return m, rep, nil
}

// TestLlamaInt8Golden quantizes every logits case's model to W8A8 int8
// with dynamic per-token activation scales on every device that has
// kernels.Quant (TinyLlama-1.1B not in -short mode) and holds its logits
// to llamaInt8Tol of the float64 reference; the per-module report
// must show every weight quantized with a bounded error, in about half
// float16's memory.
func TestLlamaInt8Golden(t *testing.T) {
	cases, err := loadLlamaCases()
	require.NoError(t, err)
	for _, dev := range quantDecoders() {
		models := map[string]*llama.Model{} // one quantized model per config and weights
		parent := t
		for _, c := range cases {
			// The GGUF cases' models are quantized already.
			if c.deep() && testing.Short() || c.GGUFType != "" {
				continue
			}
			cfg, src, err := c.source()
			require.NoError(t, err)
			t.Run(fmt.Sprintf("dev=%s/%s", dev.Name(), c.Name), func(t *testing.T) {
				key := fmt.Sprintf("%s/%s/%d", c.Config, c.Weights, c.Seed)
				m := models[key]
				if m == nil {
					var rep []quant.LinearReport
					m, rep, err = int8Llama(dev, cfg, src)
					require.NoError(t, err)
					parent.Cleanup(func() { assert.NoError(parent, m.Close()) })
					models[key] = m
					require.Len(t, rep, 7*cfg.NumHiddenLayers, "one report per linear module")
					lo, hi := math.Inf(1), math.Inf(-1)
					var bytes, f16 int64
					for _, r := range rep {
						assert.Greater(t, r.WeightSQNR, 40.0, "%s: weight SQNR", r.Name)
						assert.Less(t, float64(r.Bytes), 0.6*float64(r.F16Bytes), "%s: int8 bytes (with the scales) against float16's", r.Name)
						lo, hi = min(lo, r.WeightSQNR), max(hi, r.WeightSQNR)
						bytes, f16 = bytes+r.Bytes, f16+r.F16Bytes
					}
					t.Logf("%d linear modules: weight SQNR %.1f to %.1f dB, %.4g MB in int8 with the scales against %.4g MB in float16",
						len(rep), lo, hi, float64(bytes)/1e6, float64(f16)/1e6)
				}
				require.True(t, m.Quantized())
				logits, err := m.Forward(c.In, c.Batch, c.Seq)
				require.NoError(t, err)
				rel := c.relErr(logits, cfg.VocabSize)
				t.Logf("rel-err logits %.3g", rel)
				assert.LessOrEqual(t, rel, llamaInt8Tol(c.Name))
			})
		}
	}
}

// llamaGeneration is the greedy generation golden: prompts and the
// reference's new tokens, and the logits each step of prompt 0 chose
// from.
type llamaGeneration struct {
	prompts [][]int
	ids     [][]int
	logits0 []float32 // [new tokens, V]
}

func loadLlamaGeneration() (*llamaGeneration, error) {
	f, err := safetensors.Open(llamaGenerateGolden)
	if err != nil {
		return nil, err
	}
	g := &llamaGeneration{}
	ints := func(name string) ([]int, error) {
		v, _, err := int32s(f, name)
		out := make([]int, len(v))
		for i, x := range v {
			out[i] = int(x)
		}
		return out, err
	}
	for i := 0; ; i++ {
		if _, err := f.Tensor(fmt.Sprintf("prompt%d/prompt_ids", i)); err != nil {
			break
		}
		p, err := ints(fmt.Sprintf("prompt%d/prompt_ids", i))
		if err != nil {
			return nil, err
		}
		ids, err := ints(fmt.Sprintf("prompt%d/ids", i))
		if err != nil {
			return nil, err
		}
		g.prompts, g.ids = append(g.prompts, p), append(g.ids, ids)
	}
	if len(g.prompts) == 0 {
		return nil, fmt.Errorf("%s: no prompts", llamaGenerateGolden)
	}
	if g.logits0, err = float32s(f, "prompt0/logits"); err != nil {
		return nil, err
	}
	return g, nil
}

// greedyTokens generates n new tokens per prompt greedily, the prompts
// batched in one session.
func greedyTokens(m *llama.Model, prompts [][]int, n int) ([][]int, error) {
	maxLen := 0
	for _, p := range prompts {
		maxLen = max(maxLen, len(p)+n)
	}
	s, err := m.NewSession(len(prompts), maxLen)
	if err != nil {
		return nil, err
	}
	g, err := s.Generate(prompts, llama.GenerateOptions{MaxNewTokens: n}, nil)
	if err = errors.Join(err, s.Close()); err != nil {
		return nil, err
	}
	return g.Tokens, nil
}

// agreement counts the tokens of got equal to want's at the same place,
// and the length of their common prefix.
func agreement(got, want []int) (same, prefix int) {
	prefix = -1
	for i := range min(len(got), len(want)) {
		if got[i] == want[i] {
			same++
		} else if prefix < 0 {
			prefix = i
		}
	}
	if prefix < 0 {
		prefix = min(len(got), len(want))
	}
	return same, prefix
}

// Bounds of the int8 model's greedy generation on the tiny checkpoint.
// A token chosen differently changes the context of every later one, so
// free-running agreement is its common prefix with the float model's;
// choices from the reference's own contexts (teacher forcing) are
// independent of each other. Measured on the CPU: common prefixes of
// 24, 24 and 18 of the 24 new tokens of the 3 prompts (the float model
// matches the reference's 72), and 71 of 72 teacher-forced choices the
// reference's, the other a near tie (the two tokens 0.0016 apart in the
// float model's logits, whose standard deviation is 0.23, under the
// int8 logits' 1% error). The synthetic weights' logits are flat, and
// ties close, so the bounds leave room for other devices' rounding.
const (
	// llamaInt8GreedyPrefix is the least common prefix of the int8 and
	// float models' 24 new tokens, per prompt.
	llamaInt8GreedyPrefix = 8
	// llamaInt8ForcedAgreement is the least share of next tokens the
	// int8 model chooses as the reference does from the reference's
	// contexts.
	llamaInt8ForcedAgreement = 0.9
)

// std is the standard deviation of v.
func std(v []float32) float64 {
	var s, s2 float64
	for _, x := range v {
		s, s2 = s+float64(x), s2+float64(x)*float64(x)
	}
	n := float64(len(v))
	return math.Sqrt(max(s2/n-(s/n)*(s/n), 0))
}

// TestLlamaInt8Generate compares the greedy generation of the int8 tiny
// checkpoint with the float model's and the float64 reference's, on
// every device with kernels.Quant: free-running (the tokens each model
// chooses after its own) and teacher-forced (the next token after each
// prefix of the reference's sequence, with the logits of prompt 0's steps
// against the reference's).
func TestLlamaInt8Generate(t *testing.T) {
	gen, err := loadLlamaGeneration()
	require.NoError(t, err)
	cfg, src, err := openLlamaTiny()
	require.NoError(t, err)
	n := len(gen.ids[0])
	for _, dev := range quantDecoders() {
		t.Run("dev="+dev.Name(), func(t *testing.T) {
			fm, err := llama.Load(dev, cfg, src, llamaInt8Precision(dev))
			require.NoError(t, err)
			defer func() { assert.NoError(t, fm.Close()) }()
			float, err := greedyTokens(fm, gen.prompts, n)
			require.NoError(t, err)
			qm, _, err := int8Llama(dev, cfg, src)
			require.NoError(t, err)
			defer func() { assert.NoError(t, qm.Close()) }()
			q, err := greedyTokens(qm, gen.prompts, n)
			require.NoError(t, err)
			var sameFloat, sameRef, total int
			for i := range gen.prompts {
				sf, prefix := agreement(q[i], float[i])
				sr, _ := agreement(q[i], gen.ids[i])
				fr, _ := agreement(float[i], gen.ids[i])
				t.Logf("prompt %d: int8 tokens equal to the float model's %d/%d (common prefix %d), to the reference's %d/%d; float's to the reference's %d/%d",
					i, sf, n, prefix, sr, n, fr, n)
				assert.GreaterOrEqual(t, prefix, llamaInt8GreedyPrefix, "prompt %d: common prefix of the int8 and float tokens", i)
				sameFloat, sameRef, total = sameFloat+sf, sameRef+sr, total+n
			}
			t.Logf("free-running: int8 tokens equal to the float model's %d/%d, to the reference's %d/%d", sameFloat, total, sameRef, total)

			// Teacher forcing: every prefix of each reference sequence at
			// once, as one full forward per prompt.
			forced, all := 0, 0
			for i, p := range gen.prompts {
				seq := append(append([]int(nil), p...), gen.ids[i]...)
				ids := make([]int32, len(seq))
				for j, id := range seq {
					ids[j] = int32(id)
				}
				logits, err := qm.Forward(llama.Inputs{IDs: ids}, 1, len(ids))
				require.NoError(t, err)
				floatLogits, err := fm.Forward(llama.Inputs{IDs: ids}, 1, len(ids))
				require.NoError(t, err)
				V := cfg.VocabSize
				var steps []float32
				for j := range n {
					at := (len(p) - 1 + j) * V
					row := logits[at:][:V]
					steps = append(steps, row...)
					all++
					if got, want := kernels.IndexOfMax(row), gen.ids[i][j]; got == want {
						forced++
					} else {
						fl := floatLogits[at:][:V]
						t.Logf("prompt %d step %d: int8 chose %d, the reference %d, which the float model's logits put %.3g above it (their std %.3g)",
							i, j, got, want, fl[want]-fl[got], std(fl))
					}
				}
				if i == 0 {
					rel, _ := kernels.RelErr(widen(steps), widen(gen.logits0))
					t.Logf("prompt 0: rel-err of the int8 logits of the %d steps against the reference's %.3g", n, rel)
					assert.LessOrEqual(t, rel, llamaInt8Tolerance)
				}
			}
			t.Logf("teacher-forced: int8 next tokens equal to the reference's %d/%d", forced, all)
			assert.GreaterOrEqual(t, float64(forced), llamaInt8ForcedAgreement*float64(all))
		})
	}
}

// llamaBenchModel is a benchmark's model: TinyLlama-1.1B's shape with
// synthetic weights, or in -short mode the tiny checkpoint of the
// goldens, read from its files.
type llamaBenchModel struct {
	name   string
	golden string // the logits case Verify compares with
	// q4Golden is the logits case of the model's GGUF Q4_0 form, "" if
	// the golden has none.
	q4Golden string
	open     func() (llama.Config, nn.Source, error)
}

// openLlamaTiny opens the golden llama-tiny checkpoint's config and
// weights.
func openLlamaTiny() (llama.Config, nn.Source, error) {
	cfg, err := llama.LoadConfig(filepath.Join(llamaTinyDir, "config.json"))
	if err != nil {
		return cfg, nil, err
	}
	src, err := llama.OpenCheckpoint(filepath.Join(llamaTinyDir, "model.safetensors"))
	return cfg, src, err
}

func llamaBenchModels() llamaBenchModel {
	if testing.Short() {
		return llamaBenchModel{name: "tiny", golden: "tiny", open: openLlamaTiny}
	}
	return llamaBenchModel{name: "tinyllama", golden: "tinyllama", q4Golden: "tinyllama_q4_0", open: func() (llama.Config, nn.Source, error) {
		return llama.TinyLlama(), llama.Synthetic(llamaSeed), nil
	}}
}

// goldenCase is the logits case of the model in variant v.
func (lm llamaBenchModel) goldenCase(v llamaVariant) string {
	if v.gguf == gguf.Q4_0 {
		return lm.q4Golden
	}
	return lm.golden
}

// llamaDTypes are the precisions a Llama benchmark runs in on dev.
func llamaDTypes(dev kernels.Backend, cpu ...nn.Precision) []nn.Precision {
	switch {
	case testing.Short():
		return []nn.Precision{nn.F32}
	case dev.Info().Kind == kernels.GPU:
		return []nn.Precision{nn.F16, nn.BF16}
	}
	return cpu
}

// llamaInt8Points says where a Llama benchmark has dtype=int8 points (the
// model of int8Llama), on the devices with kernels.Quant.
type llamaInt8Points int

const (
	noInt8       llamaInt8Points = iota
	int8Full                     // not in -short mode
	int8AndShort                 // in -short mode too, at its one shape
)

// llamaVariant is a model a Llama benchmark runs: a float precision, or
// int8 around the products and that precision around them.
type llamaVariant struct {
	p    nn.Precision
	int8 bool
	// wo, when set, is a weight-only format (Model.QuantizeWeights) with
	// p around the products.
	wo kernels.WeightFormat
	// fp8 is the FP8 model (Model.QuantizeFP8: E4M3 weights per channel,
	// inputs per token) with p around the products.
	fp8 bool
	// gguf, where set, is the GGUF model of that type (Q4_0, or Q8_0 on
	// the CPU), as `zbench quantize --format gguf --type T` writes it and
	// zbench generate loads it: every 2-D tensor rounded through T
	// (gguf.Rounded), the decoder layers' weights and lm_head on the
	// weight-only kernels in groups of 32 (gguf.LoadLlama: int4 for Q4_0,
	// int8 for Q8_0), embed_tokens dequantized to p, with p around the
	// products: the model llama.cpp runs from the same file.
	gguf gguf.Type
}

// llamaVariants are the models a Llama benchmark runs on dev: the float
// precisions of llamaDTypes, then int8 where points says so, then with
// weightOnly the weight-only int8 model (w8a16) and the GGUF Q4_0 model
// (w4a16), both with f32 around the products, not in -short mode, on
// devices with kernels.WeightQuant, and where points says int8, the FP8
// model (dtype=fp8, not in -short mode) on GPUs with kernels.FP8. The
// Q4_0 model is checked against the golden of the same rounded weights:
// against the float model's, 4-bit weights' error compounds over
// TinyLlama's 22 layers to 0.64 (int4, groups of 128) and 0.80 (NF4) of
// the logits' norm on its uniform synthetic weights, past any meaningful
// bound (2 layers: 0.13 and 0.16). The other 4-bit formats' GEMV is
// BenchmarkMatMul's.
func llamaVariants(dev kernels.Backend, points llamaInt8Points, weightOnly bool, cpu ...nn.Precision) []llamaVariant {
	var out []llamaVariant
	for _, p := range llamaDTypes(dev, cpu...) {
		out = append(out, llamaVariant{p: p})
	}
	if _, err := kernels.Group[kernels.Quant](dev); err == nil && (points == int8AndShort || (points == int8Full && !testing.Short())) {
		out = append(out, llamaVariant{p: llamaInt8Precision(dev), int8: true})
	}
	if _, err := kernels.Group[kernels.WeightQuant](dev); err == nil && weightOnly && !testing.Short() {
		out = append(out, llamaVariant{p: nn.F32, wo: kernels.WInt8}, llamaVariant{p: nn.F32, gguf: gguf.Q4_0})
		if dev.Info().Kind == kernels.CPU { // the CUDA int8 kernels take a scale per row: Q8_0 would load as floats
			out = append(out, llamaVariant{p: nn.F32, gguf: gguf.Q8_0})
		}
	}
	// FP8 on GPUs only: the CPU's FP8 is an emulation (codes widened to
	// float32), for its goldens, not its speed.
	if _, err := kernels.Group[kernels.FP8](dev); err == nil && points != noInt8 && !testing.Short() && dev.Info().Kind == kernels.GPU {
		out = append(out, llamaVariant{p: llamaInt8Precision(dev), fp8: true})
	}
	return out
}

// llamaBench is one model of a Llama benchmark on one device, loaded
// (and quantized, for int8, w8a16, w4a16 and fp8) by the first of its sub-benchmarks
// that runs, so that a -bench pattern selecting others loads nothing.
type llamaBench struct {
	dev    kernels.Backend
	lm     llamaBenchModel
	v      llamaVariant
	golden *llamaCase
	m      *llama.Model
}

// dtype is the model's dtype, in benchmark names and for the roofline:
// int8, or its precision's.
func (l *llamaBench) dtype() kernels.DType {
	if l.v.int8 {
		return kernels.I8
	}
	return l.v.p.DType()
}

// dtypeName is the model's dtype in benchmark names: dtype's, or the
// weight-only format's (w8a16, w4a16, nf4), or q8_0 for the GGUF Q8_0 model.
func (l *llamaBench) dtypeName() string {
	switch {
	case l.v.wo != 0:
		return weightDType(l.v.wo)
	case l.v.gguf == gguf.Q4_0:
		return weightDType(kernels.WInt4)
	case l.v.gguf == gguf.Q8_0:
		return "q8_0"
	case l.v.fp8:
		return "fp8"
	}
	return l.dtype().String()
}

// model returns the model, loading it on first use.
func (l *llamaBench) model(b *testing.B) *llama.Model {
	b.Helper()
	if l.m == nil {
		cfg, src, err := l.lm.open()
		if err != nil {
			b.Fatal(err)
		}
		var m *llama.Model
		if l.v.gguf != 0 {
			var r *gguf.Rounded
			if r, err = gguf.NewRounded(src, l.v.gguf); err == nil {
				m, err = gguf.LoadLlama(l.dev, cfg, r, l.v.p)
			}
		} else {
			m, err = llama.Load(l.dev, cfg, src, l.v.p)
		}
		if err != nil {
			b.Fatal(err)
		}
		if l.v.int8 {
			if _, err := m.Quantize(); err != nil {
				b.Fatal(errors.Join(err, m.Close()))
			}
		}
		if l.v.wo != 0 {
			if _, err := m.QuantizeWeights(l.v.wo, weightGroups[l.v.wo]); err != nil {
				b.Fatal(errors.Join(err, m.Close()))
			}
		}
		if l.v.fp8 {
			if _, err := m.QuantizeFP8(); err != nil {
				b.Fatal(errors.Join(err, m.Close()))
			}
		}
		l.m = m
	}
	return l.m
}

// verify returns the rel-err of the model's logits on the golden case.
func (l *llamaBench) verify() (float64, error) {
	logits, err := l.m.Forward(l.golden.In, l.golden.Batch, l.golden.Seq)
	if err != nil {
		return 0, err
	}
	return l.golden.relErr(logits, l.m.Config.VocabSize), nil
}

// tolerance is the rel-err the model's logits must reach.
func (l *llamaBench) tolerance() float64 {
	switch {
	case l.v.wo != 0 || l.v.fp8 || l.v.gguf != 0:
		return benchTolerance("model="+l.lm.name, l.dtypeName())
	case l.v.int8:
		return llamaInt8Tol(l.lm.golden)
	case l.v.p == nn.BF16 && l.lm.golden == "tinyllama":
		return deepBF16Tolerance
	}
	for _, pr := range llamaPrecisions {
		if pr.p == l.v.p {
			return pr.tol
		}
	}
	return 0
}

// forEachLlama runs body for the benchmark model of every device and
// variant, closing the model afterwards if a sub-benchmark loaded it.
func forEachLlama(b *testing.B, cpu []nn.Precision, int8 llamaInt8Points, weightOnly bool, body func(l *llamaBench)) {
	lm := llamaBenchModels()
	cases, err := loadLlamaCases()
	if err != nil {
		b.Fatal(err)
	}
	golden := map[string]*llamaCase{}
	for _, c := range cases {
		golden[c.Name] = c
	}
	for _, dev := range decoders() {
		for _, v := range llamaVariants(dev, int8, weightOnly, cpu...) {
			name := lm.goldenCase(v)
			if golden[name] == nil {
				b.Fatalf("%s: no case %q", llamaGolden, name)
			}
			l := &llamaBench{dev: dev, lm: lm, v: v, golden: golden[name]}
			body(l)
			if l.m != nil {
				if err := l.m.Close(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// prompts returns batch seeded prompts of n token ids.
func llamaPrompts(seed uint64, batch, n, vocab int) [][]int {
	u := uniform(seed, kernels.F32, batch*n)
	out := make([][]int, batch)
	for b := range out {
		for i := range n {
			out[b] = append(out[b], 3+int((u[b*n+i]+1)/2*float32(vocab-4)))
		}
	}
	return out
}

// llamaShapes returns the (batch, length) points of a Llama benchmark:
// the GPU sweep, the CPU points, or in -short mode the first CPU point.
func llamaShapes(dev kernels.Backend, gpu, cpu [][2]int) [][2]int {
	switch {
	case testing.Short():
		return cpu[:1]
	case dev.Info().Kind == kernels.GPU:
		return gpu
	}
	return cpu
}

// BenchmarkLlamaPrefill is the prefill of batch prompts of seq tokens into
// an empty KV cache, with the logits of each prompt's last token: one op,
// batch·seq tokens (tok/s), %peak against the compute roofline. rel-err is
// the model's logits on the golden input against the PyTorch reference.
// dtype=int8 is the model of int8Llama (W8A8 with dynamic per-token
// activation scales) on the devices with kernels.Quant, at the same
// shapes, not in -short mode; its rel-err is against the same reference:
// the accuracy int8 costs. dtype=w8a16 and w4a16 are the weight-only int8
// and GGUF Q4_0 models as in BenchmarkLlamaDecode.
func BenchmarkLlamaPrefill(b *testing.B) {
	forEachLlama(b, []nn.Precision{nn.F32, nn.F16, nn.BF16}, int8Full, true, func(l *llamaBench) {
		dev := l.dev
		for _, s := range llamaShapes(dev, [][2]int{{1, 512}, {8, 512}, {32, 512}}, [][2]int{{1, 128}}) {
			batch, seq := s[0], s[1]
			b.Run(fmt.Sprintf("dev=%s/dtype=%v/model=%s/batch=%d/seq=%d", dev.Name(), l.dtypeName(), l.lm.name, batch, seq), func(b *testing.B) {
				m := l.model(b)
				sess, err := m.NewSession(batch, seq)
				if err != nil {
					b.Fatal(err)
				}
				defer sess.Close()
				prompts := llamaPrompts(uint64(batch*100000+seq), batch, seq, m.Config.VocabSize)
				dt := l.dtype()
				w := m.PrefillWork(batch, seq)
				zbench.Measure(b, zbench.Bench{
					Dev: dev, Op: func() error { return sess.Prefill(prompts) },
					Work:   zbench.Workload{FLOPs: w.FLOPs, Bytes: w.Bytes, DType: dt, Items: float64(batch * seq), ItemUnit: "tok/s"},
					Verify: l.verify, MaxRelErr: l.tolerance(),
				})
			})
		}
	})
}

// BenchmarkLlamaDecode is one decode step of batch sequences whose KV
// caches hold ctx tokens (the cache is rewound to ctx after each op, so
// every op decodes at the same context): batch tokens per op (tok/s), and
// %peak against the memory roofline, since a step reads every weight and
// the whole cache once. dtype=int8 is the model of int8Llama on the
// devices with kernels.Quant, at the same shapes (the one point of -short
// mode included), its bytes the int8 weights with their scales;
// dtype=w8a16 the weight-only int8 model (Model.QuantizeWeights, f32
// activations, lm_head in float32) and dtype=w4a16 the GGUF Q4_0 model
// (llamaVariant.gguf, f32 activations, lm_head in Q4_0 too; its rel-err
// against the golden of the same Q4_0 weights) on the devices with
// kernels.WeightQuant, and on the CPU dtype=q8_0 the GGUF Q8_0 model, the
// one llama.cpp's Q8_0 rows run, not in -short mode; their bytes are the
// codes and scales as the model holds them. Every row is a read-only
// workload: %bw is against the read-only stream run between its
// iterations (rd-GB/s).
func BenchmarkLlamaDecode(b *testing.B) {
	forEachLlama(b, []nn.Precision{nn.F32, nn.F16, nn.BF16}, int8AndShort, true, func(l *llamaBench) {
		dev := l.dev
		gpu := [][2]int{{1, 128}, {1, 512}, {1, 2048}, {8, 128}, {8, 512}, {8, 2048}, {32, 128}, {32, 512}, {32, 2048}}
		for _, s := range llamaShapes(dev, gpu, [][2]int{{1, 128}, {8, 128}}) {
			batch, ctx := s[0], s[1]
			b.Run(fmt.Sprintf("dev=%s/dtype=%v/model=%s/batch=%d/ctx=%d", dev.Name(), l.dtypeName(), l.lm.name, batch, ctx), func(b *testing.B) {
				m := l.model(b)
				sess, err := m.NewSession(batch, ctx+1)
				if err != nil {
					b.Fatal(err)
				}
				defer sess.Close()
				if err := sess.Prefill(llamaPrompts(uint64(batch*100000+ctx), batch, ctx, m.Config.VocabSize)); err != nil {
					b.Fatal(err)
				}
				next := make([]int, batch)
				for i := range next {
					next[i] = 3 + i
				}
				dt := l.dtype()
				w := m.DecodeWork(batch, ctx)
				zbench.Measure(b, zbench.Bench{
					Dev: dev,
					Op: func() error {
						if err := sess.Rewind(ctx); err != nil {
							return err
						}
						return sess.Decode(next)
					},
					Work:   zbench.Workload{FLOPs: w.FLOPs, Bytes: w.Bytes, DType: dt, ReadOnly: true, Items: float64(batch), ItemUnit: "tok/s"},
					Verify: l.verify, MaxRelErr: l.tolerance(),
				})
			})
		}
	})
}

// BenchmarkLlamaGenerate is greedy generation at batch 1: one op is the
// prefill of a prompt and the decode of new tokens, each chosen on the
// device and read back, as a user of generate sees it. It reports the
// time to first token (ttft-ms) and the decode rate after it (tok/s).
func BenchmarkLlamaGenerate(b *testing.B) {
	forEachLlama(b, []nn.Precision{nn.F32}, noInt8, false, func(l *llamaBench) {
		dev := l.dev
		for _, s := range llamaShapes(dev, [][2]int{{128, 100}}, [][2]int{{32, 16}}) {
			prompt, newTokens := s[0], s[1]
			b.Run(fmt.Sprintf("dev=%s/dtype=%v/model=%s/prompt=%d/new=%d", dev.Name(), l.dtypeName(), l.lm.name, prompt, newTokens), func(b *testing.B) {
				m := l.model(b)
				sess, err := m.NewSession(1, prompt+newTokens)
				if err != nil {
					b.Fatal(err)
				}
				defer sess.Close()
				prompts := llamaPrompts(uint64(prompt), 1, prompt, m.Config.VocabSize)
				var ttft, decode time.Duration
				var steps int
				dt := m.Precision.DType()
				pw := m.Config.PrefillWork(1, prompt, dt.Size())
				w := zbench.Workload{FLOPs: pw.FLOPs, Bytes: pw.Bytes, DType: dt}
				for i := range newTokens - 1 {
					dw := m.Config.DecodeWork(1, prompt+i, dt.Size())
					w.FLOPs, w.Bytes = w.FLOPs+dw.FLOPs, w.Bytes+dw.Bytes
				}
				zbench.Measure(b, zbench.Bench{
					Dev: dev,
					Op: func() error {
						g, err := sess.Generate(prompts, llama.GenerateOptions{MaxNewTokens: newTokens}, nil)
						if err != nil {
							return err
						}
						ttft += g.FirstToken
						for _, d := range g.Steps {
							decode += d
						}
						steps += len(g.Steps)
						return nil
					},
					Work: w, Verify: l.verify, MaxRelErr: l.tolerance(),
				})
				// The warm-up call is counted too: the means are over
				// every call.
				calls := float64(b.N + 1)
				b.ReportMetric(float64(ttft)/calls/1e6, "ttft-ms")
				b.ReportMetric(float64(steps)/decode.Seconds(), "tok/s")
			})
		}
	})
}

// writeLlamaCheckpoint writes m's config's synthetic weights as a BF16
// safetensors checkpoint of two shards (the format TinyLlama ships) in
// dir, and returns the shards' paths and their size in bytes.
func writeLlamaCheckpoint(dir string, cfg llama.Config, src nn.Source) ([]string, int64, error) {
	params := cfg.Params()
	var paths []string
	var total int64
	for i, part := range [][]nn.Param{params[:len(params)/2], params[len(params)/2:]} {
		var ts []safetensors.Tensor
		for _, p := range part {
			vals, err := src.Values(p)
			if err != nil {
				return nil, 0, err
			}
			data := make([]byte, 2*len(vals))
			if err := kernels.EncodeFloat32(kernels.BF16, data, vals); err != nil {
				return nil, 0, err
			}
			ts = append(ts, safetensors.Tensor{Name: p.Name, DType: "BF16", Shape: p.Shape, Data: data})
			total += int64(len(data))
		}
		path := filepath.Join(dir, fmt.Sprintf("model-%05d-of-00002.safetensors", i+1))
		f, err := os.Create(path)
		if err != nil {
			return nil, 0, err
		}
		w := bufio.NewWriter(f)
		err = safetensors.Write(w, ts, map[string]string{"format": "pt"})
		if err == nil {
			err = w.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, 0, err
		}
		paths = append(paths, path)
	}
	return paths, total, nil
}

// BenchmarkLlamaLoad is the load of a real-format checkpoint: a BF16
// safetensors checkpoint in two shards, TinyLlama's shape (the tiny
// checkpoint's in -short mode), opened, read (from the page cache: the
// files were just written), converted and uploaded to the device in the
// benchmark's dtype. GB/s is the checkpoint's bytes over the time.
func BenchmarkLlamaLoad(b *testing.B) {
	cfg := llama.TinyLlama()
	name := "tinyllama"
	if testing.Short() {
		var err error
		if cfg, err = llama.LoadConfig(filepath.Join(llamaTinyDir, "config.json")); err != nil {
			b.Fatal(err)
		}
		name = "tiny"
	}
	paths, size, err := writeLlamaCheckpoint(b.TempDir(), cfg, llama.Synthetic(llamaSeed))
	if err != nil {
		b.Fatal(err)
	}
	for _, dev := range decoders() {
		p := nn.BF16
		b.Run(fmt.Sprintf("dev=%s/dtype=%v/model=%s/format=safetensors-bf16", dev.Name(), p, name), func(b *testing.B) {
			zbench.Measure(b, zbench.Bench{
				Dev: dev,
				Op: func() error {
					ck, err := llama.OpenCheckpoint(paths...)
					if err != nil {
						return err
					}
					m, err := llama.Load(dev, cfg, ck, p)
					if err != nil {
						return err
					}
					if err := dev.Sync(); err != nil {
						return err
					}
					return m.Close()
				},
				Work: zbench.Workload{Bytes: float64(size), DType: p.DType()},
			})
		})
	}
}
