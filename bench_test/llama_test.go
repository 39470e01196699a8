package bench_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/zbench"
	"github.com/zbench/zbench/zbench/compare"
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

// source returns the case's config and weights.
func (c *llamaCase) source() (llama.Config, nn.Source, error) {
	cfg, err := llama.ParseConfig(c.Name+" config", c.Config)
	if err != nil {
		return cfg, nil, err
	}
	if c.Weights == "synthetic" {
		return cfg, llama.Synthetic(c.Seed), nil
	}
	src, err := llama.OpenCheckpoint([]string{filepath.Join("..", c.Weights, "model.safetensors")})
	return cfg, src, err
}

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
// (compare.DeepModels says why), the one zbench compare's accuracy gate
// applies to its rows.
var deepBF16Tolerance = compare.BenchTolerance("BenchmarkLlamaDecode/model=tinyllama", "bf16")

// decoders are the devices that run decoder-only models.
func decoders() []kernels.Backend { return devicesWith[kernels.Decoder]() }

// TestLlamaGolden runs every logits case — the tiny checkpoint with and
// without padding, GQA with llama3 rope scaling, linear scaling, and
// TinyLlama-1.1B's shape with synthetic weights — on every device in
// every precision (TinyLlama not in -short mode, and on the CPU in f32 only).
func TestLlamaGolden(t *testing.T) {
	cases, err := loadLlamaCases()
	require.NoError(t, err)
	devs := decoders()
	require.NotEmpty(t, devs, "no device implements the decoder ops")
	for _, dev := range devs {
		for _, c := range cases {
			cfg, src, err := c.source()
			require.NoError(t, err)
			for _, pr := range llamaPrecisions {
				// TinyLlama's 1.1 B weights: f32 only on the CPU (bf16
				// there is the benchmarks' check), never in -short mode.
				if c.Name == "tinyllama" && (testing.Short() || (pr.p != nn.F32 && dev.Name() == "cpu")) {
					continue
				}
				tol := pr.tol
				if c.Name == "tinyllama" && pr.p == nn.BF16 {
					tol = deepBF16Tolerance
				}
				t.Run(fmt.Sprintf("dev=%s/%s/%v", dev.Name(), c.Name, pr.p), func(t *testing.T) {
					m, err := llama.Load(dev, cfg, src, pr.p)
					require.NoError(t, err)
					defer func() { require.NoError(t, m.Close()) }()
					logits, err := m.Forward(c.In, c.Batch, c.Seq)
					require.NoError(t, err)
					rel := c.relErr(logits, cfg.VocabSize)
					t.Logf("rel-err logits %.3g", rel)
					assert.LessOrEqual(t, rel, tol)
				})
			}
		}
	}
}

// llamaBenchModel is a benchmark's model: TinyLlama-1.1B's shape with
// synthetic weights, or in -short mode the tiny checkpoint of the
// goldens, loaded from its files.
type llamaBenchModel struct {
	name   string
	golden string // the logits case Verify compares with
	load   func(dev kernels.Backend, p nn.Precision) (*llama.Model, error)
}

func llamaBenchModels() llamaBenchModel {
	if testing.Short() {
		return llamaBenchModel{name: "tiny", golden: "tiny", load: func(dev kernels.Backend, p nn.Precision) (*llama.Model, error) {
			cfg, err := llama.LoadConfig(filepath.Join(llamaTinyDir, "config.json"))
			if err != nil {
				return nil, err
			}
			src, err := llama.OpenCheckpoint([]string{filepath.Join(llamaTinyDir, "model.safetensors")})
			if err != nil {
				return nil, err
			}
			return llama.Load(dev, cfg, src, p)
		}}
	}
	return llamaBenchModel{name: "tinyllama", golden: "tinyllama", load: func(dev kernels.Backend, p nn.Precision) (*llama.Model, error) {
		return llama.Load(dev, llama.TinyLlama(), llama.Synthetic(llamaSeed), p)
	}}
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

// forEachLlama loads the benchmark model once per device and precision
// and runs body for it, closing the model afterwards.
func forEachLlama(b *testing.B, cpu []nn.Precision, body func(m *llama.Model, lm llamaBenchModel, verify func() (float64, error))) {
	lm := llamaBenchModels()
	cases, err := loadLlamaCases()
	if err != nil {
		b.Fatal(err)
	}
	var golden *llamaCase
	for _, c := range cases {
		if c.Name == lm.golden {
			golden = c
		}
	}
	if golden == nil {
		b.Fatalf("%s: no case %q", llamaGolden, lm.golden)
	}
	for _, dev := range decoders() {
		for _, p := range llamaDTypes(dev, cpu...) {
			m, err := lm.load(dev, p)
			if err != nil {
				b.Fatal(err)
			}
			verify := func() (float64, error) {
				logits, err := m.Forward(golden.In, golden.Batch, golden.Seq)
				if err != nil {
					return 0, err
				}
				return golden.relErr(logits, m.Config.VocabSize), nil
			}
			body(m, lm, verify)
			if err := m.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// llamaTolerance is the rel-err a benchmark model's logits must reach.
func llamaTolerance(p nn.Precision, lm llamaBenchModel) float64 {
	if p == nn.BF16 && lm.golden == "tinyllama" {
		return deepBF16Tolerance
	}
	for _, pr := range llamaPrecisions {
		if pr.p == p {
			return pr.tol
		}
	}
	return 0
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
func BenchmarkLlamaPrefill(b *testing.B) {
	forEachLlama(b, []nn.Precision{nn.F32}, func(m *llama.Model, lm llamaBenchModel, verify func() (float64, error)) {
		dev := m.Backend()
		for _, s := range llamaShapes(dev, [][2]int{{1, 512}, {8, 512}, {32, 512}}, [][2]int{{1, 128}}) {
			batch, seq := s[0], s[1]
			b.Run(fmt.Sprintf("dev=%s/dtype=%v/model=%s/batch=%d/seq=%d", dev.Name(), m.Precision, lm.name, batch, seq), func(b *testing.B) {
				sess, err := m.NewSession(batch, seq)
				if err != nil {
					b.Fatal(err)
				}
				defer sess.Close()
				prompts := llamaPrompts(uint64(batch*100000+seq), batch, seq, m.Config.VocabSize)
				dt := m.Precision.DType()
				w := m.Config.PrefillWork(batch, seq, dt.Size())
				zbench.Measure(b, zbench.Bench{
					Dev: dev, Op: func() error { return sess.Prefill(prompts) },
					Work:   zbench.Workload{FLOPs: w.FLOPs, Bytes: w.Bytes, DType: dt, Items: float64(batch * seq), ItemUnit: "tok/s"},
					Verify: verify, MaxRelErr: llamaTolerance(m.Precision, lm),
				})
			})
		}
	})
}

// BenchmarkLlamaDecode is one decode step of batch sequences whose KV
// caches hold ctx tokens (the cache is rewound to ctx after each op, so
// every op decodes at the same context): batch tokens per op (tok/s), and
// %peak against the memory roofline, since a step reads every weight and
// the whole cache once.
func BenchmarkLlamaDecode(b *testing.B) {
	forEachLlama(b, []nn.Precision{nn.F32, nn.BF16}, func(m *llama.Model, lm llamaBenchModel, verify func() (float64, error)) {
		dev := m.Backend()
		gpu := [][2]int{{1, 128}, {1, 512}, {1, 2048}, {8, 128}, {8, 512}, {8, 2048}, {32, 128}, {32, 512}, {32, 2048}}
		for _, s := range llamaShapes(dev, gpu, [][2]int{{1, 128}}) {
			batch, ctx := s[0], s[1]
			b.Run(fmt.Sprintf("dev=%s/dtype=%v/model=%s/batch=%d/ctx=%d", dev.Name(), m.Precision, lm.name, batch, ctx), func(b *testing.B) {
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
				dt := m.Precision.DType()
				w := m.Config.DecodeWork(batch, ctx, dt.Size())
				zbench.Measure(b, zbench.Bench{
					Dev: dev,
					Op: func() error {
						if err := sess.Rewind(ctx); err != nil {
							return err
						}
						return sess.Decode(next)
					},
					Work:   zbench.Workload{FLOPs: w.FLOPs, Bytes: w.Bytes, DType: dt, Items: float64(batch), ItemUnit: "tok/s"},
					Verify: verify, MaxRelErr: llamaTolerance(m.Precision, lm),
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
	forEachLlama(b, []nn.Precision{nn.F32}, func(m *llama.Model, lm llamaBenchModel, verify func() (float64, error)) {
		dev := m.Backend()
		for _, s := range llamaShapes(dev, [][2]int{{128, 100}}, [][2]int{{32, 16}}) {
			prompt, newTokens := s[0], s[1]
			b.Run(fmt.Sprintf("dev=%s/dtype=%v/model=%s/prompt=%d/new=%d", dev.Name(), m.Precision, lm.name, prompt, newTokens), func(b *testing.B) {
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
					Work: w, Verify: verify, MaxRelErr: llamaTolerance(m.Precision, lm),
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
					ck, err := llama.OpenCheckpoint(paths)
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
