package bench_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/lora"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/zbench"
)

// loraGoldenPath is written by testdata/reference/lora.py.
const loraGoldenPath = "../testdata/golden/lora.safetensors"

// loraGolden is one case of the LoRA golden: a model of synthetic
// weights, an initial adapter, ten micro-batches and what the reference
// computed from them in float64.
type loraGolden struct {
	name       string
	f          *safetensors.File
	cfg        llama.Config
	seed       uint64
	opts       llama.TrainOptions // without the adapter's values
	batches    []llama.TrainBatch
	loss, norm []float32
	lr         []float32
}

// loadLoRAGolden reads case name of the LoRA golden.
func loadLoRAGolden(name string) (*loraGolden, error) {
	f, err := safetensors.Open(loraGoldenPath)
	if err != nil {
		return nil, err
	}
	var meta struct {
		Config json.RawMessage
		Seed   uint64
		Batch  int
		Seq    int
		LoRA   struct {
			R       int      `json:"r"`
			Alpha   float64  `json:"lora_alpha"`
			Dropout float64  `json:"lora_dropout"`
			Targets []string `json:"target_modules"`
			RSLoRA  bool     `json:"use_rslora"`
		} `json:"lora"`
		Optim struct {
			LR          float32    `json:"lr"`
			Betas       [2]float32 `json:"betas"`
			Eps         float32    `json:"eps"`
			WeightDecay float32    `json:"weight_decay"`
			Warmup      int        `json:"warmup_steps"`
			Schedule    string     `json:"schedule"`
			MaxGradNorm float64    `json:"max_grad_norm"`
			Steps       int        `json:"steps"`
		} `json:"optim"`
	}
	raw, ok := f.Metadata()[name]
	if !ok {
		return nil, fmt.Errorf("%s: no case %q", loraGoldenPath, name)
	}
	if err := json.Unmarshal([]byte(raw), &meta); err != nil {
		return nil, fmt.Errorf("%s: case %s: %w", loraGoldenPath, name, err)
	}
	g := &loraGolden{name: name, f: f, seed: meta.Seed}
	if g.cfg, err = llama.ParseConfig(name+" config", meta.Config); err != nil {
		return nil, err
	}
	o := meta.Optim
	g.opts = llama.TrainOptions{
		Batch: meta.Batch, Seq: meta.Seq,
		LoRA:        lora.Config{R: meta.LoRA.R, Alpha: meta.LoRA.Alpha, Dropout: meta.LoRA.Dropout, Targets: meta.LoRA.Targets, RSLoRA: meta.LoRA.RSLoRA},
		AdamW:       nn.AdamW{LR: o.LR, Beta1: o.Betas[0], Beta2: o.Betas[1], Eps: o.Eps, WeightDecay: o.WeightDecay},
		Schedule:    nn.Schedule{Kind: o.Schedule, Warmup: o.Warmup, Total: o.Steps},
		MaxGradNorm: o.MaxGradNorm,
	}
	ids, shape, err := int32s(f, name+"/input_ids")
	if err != nil {
		return nil, err
	}
	labels, _, err := int32s(f, name+"/labels")
	if err != nil {
		return nil, err
	}
	if len(shape) != 3 || shape[0] != o.Steps || shape[1] != meta.Batch || shape[2] != meta.Seq || len(labels) != len(ids) {
		return nil, fmt.Errorf("%s: %s/input_ids has shape %v, want [%d %d %d] as labels", loraGoldenPath, name, shape, o.Steps, meta.Batch, meta.Seq)
	}
	n := meta.Batch * meta.Seq
	for k := range o.Steps {
		g.batches = append(g.batches, llama.TrainBatch{IDs: ids[k*n : (k+1)*n], Labels: labels[k*n : (k+1)*n]})
	}
	for role, dst := range map[string]*[]float32{"loss": &g.loss, "grad_norm": &g.norm, "lr": &g.lr} {
		if *dst, err = float32s(f, name+"/"+role); err != nil {
			return nil, err
		}
		if len(*dst) != o.Steps {
			return nil, fmt.Errorf("%s: %s/%s has %d values for %d steps", loraGoldenPath, name, role, len(*dst), o.Steps)
		}
	}
	return g, nil
}

// adapter reads one of the golden's adapters: init, grad, step1 or final.
func (g *loraGolden) adapter(stage string) (*lora.Adapter, error) {
	ts := g.opts.LoRA.TargetsOf(g.cfg.NumHiddenLayers, g.cfg.ModuleDims)
	ad := &lora.Adapter{Config: g.opts.LoRA, Targets: ts, Tensors: map[string][]float32{}}
	for _, p := range g.opts.LoRA.Params(ts) {
		v, err := float32s(g.f, g.name+"/"+stage+"/"+p.Name)
		if err != nil {
			return nil, err
		}
		ad.Tensors[p.Name] = v
	}
	return ad, nil
}

// loraResult is the relative error of each figure of a golden run, by
// name ("loss 3", "grad …", "step1 …", "final …").
type loraResult map[string]float64

// worst is the largest error.
func (r loraResult) worst() (string, float64) {
	name, w := "", 0.0
	for n, e := range r {
		if e > w || math.IsNaN(e) {
			name, w = n, e
		}
	}
	return name, w
}

// run trains the case's model on dev in precision p for steps updates
// (at most the golden's) and compares with the reference; it returns the
// losses too.
func (g *loraGolden) run(dev kernels.Backend, p nn.Precision, steps int) (loraResult, []float64, error) {
	m, err := llama.Load(dev, g.cfg, llama.Synthetic(g.seed), p)
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	init, err := g.adapter("init")
	if err != nil {
		return nil, nil, err
	}
	o := g.opts
	o.Adapter = init.Source()
	tr, err := llama.NewTrainer(m, o)
	if err != nil {
		return nil, nil, err
	}
	defer tr.Close()
	res := loraResult{}
	var losses []float64
	relTo := func(got, want float64) float64 { return math.Abs(got-want) / math.Abs(want) }
	compareAdapter := func(stage string, scale float64, get func(name string) ([]float32, error)) error {
		want, err := g.adapter(stage)
		if err != nil {
			return err
		}
		for name, w := range want.Tensors {
			v, err := get(name)
			if err != nil {
				return err
			}
			wv := widen(w)
			for i := range wv {
				wv[i] *= scale
			}
			res[stage+" "+name], _ = kernels.RelErr(widen(v), wv)
		}
		return nil
	}
	for k := range min(steps, len(g.batches)) {
		r, err := tr.Step(g.batches[k])
		if err != nil {
			return nil, nil, err
		}
		losses = append(losses, r.Loss)
		res[fmt.Sprintf("loss %d", k+1)] = relTo(r.Loss, float64(g.loss[k]))
		res[fmt.Sprintf("grad-norm %d", k+1)] = relTo(r.GradNorm, float64(g.norm[k]))
		if g.lr[k] != 0 || r.LR != 0 {
			res[fmt.Sprintf("lr %d", k+1)] = relTo(r.LR, float64(g.lr[k]))
		}
		final := k == len(g.batches)-1
		if k != 0 && !final {
			continue
		}
		got, err := tr.Adapter()
		if err != nil {
			return nil, nil, err
		}
		values := func(name string) ([]float32, error) { return got.Tensors[name], nil }
		if final {
			if err := compareAdapter("final", 1, values); err != nil {
				return nil, nil, err
			}
			continue
		}
		// The trainer's gradients are clipped, the golden's raw.
		clip := min(1, g.opts.MaxGradNorm/(float64(g.norm[0])+1e-6))
		if err := compareAdapter("grad", clip, tr.Grad); err != nil {
			return nil, nil, err
		}
		if err := compareAdapter("step1", 1, values); err != nil {
			return nil, nil, err
		}
	}
	return res, losses, nil
}

// loraTolerance is the largest relative error of a golden run in
// precision p: float32 arithmetic against the float64 reference, or a
// 16-bit frozen base.
func loraTolerance(p nn.Precision) float64 {
	if p == nn.F32 {
		return 2e-4
	}
	return 5e-2
}

// TestLlamaLoRAGolden trains each golden case on every device that
// implements the decoder's backward ops and compares the losses, gradient
// norms and rates of every update, the first update's gradients and
// adapter, and the final adapter with the reference's; the bf16 base is
// held to its own tolerance on the tiny case. TinyLlama's width runs its
// first three updates on a CPU (its matmuls take seconds there) and all
// ten elsewhere.
func TestLlamaLoRAGolden(t *testing.T) {
	for _, dev := range devicesWith[kernels.DecoderBackward]() {
		for _, tc := range []struct {
			name   string
			p      nn.Precision
			cpuCap int
		}{{"tiny", nn.F32, 10}, {"tiny", nn.BF16, 10}, {"tinyllama2l", nn.F32, 3}} {
			t.Run(fmt.Sprintf("dev=%s/%s/%v", dev.Name(), tc.name, tc.p), func(t *testing.T) {
				g, err := loadLoRAGolden(tc.name)
				require.NoError(t, err)
				steps := len(g.batches)
				if dev.Info().Kind != kernels.GPU {
					steps = tc.cpuCap
				}
				res, losses, err := g.run(dev, tc.p, steps)
				require.NoError(t, err)
				name, worst := res.worst()
				t.Logf("worst rel-err %.3g (%s) over %d figures", worst, name, len(res))
				for k, l := range losses {
					t.Logf("update %2d: loss %.7f, reference %.7f", k+1, l, g.loss[k])
				}
				require.LessOrEqual(t, worst, loraTolerance(tc.p), name)
			})
		}
	}
}

// loraBenchModel is BenchmarkLlamaLoRA's model on dev, with its
// precision and sizes: TinyLlama-1.1B in bf16 at batch 4 and 8 × 512 on a
// GPU, its width at two layers in f32 at 1 × 128 on a CPU, and the tiny
// golden config in f32 at 1 × 32 in -short.
func loraBenchModel(dev kernels.Backend, tiny llama.Config) (name string, cfg llama.Config, p nn.Precision, batches []int, seq int) {
	switch {
	case testing.Short():
		return "tiny", tiny, nn.F32, []int{1}, 32
	case dev.Info().Kind == kernels.GPU:
		return "tinyllama-1.1b", llama.TinyLlama(), nn.BF16, []int{4, 8}, 512
	}
	cfg = llama.TinyLlama()
	cfg.NumHiddenLayers = 2
	return "tinyllama-2l", cfg, nn.F32, []int{1}, 128
}

// BenchmarkLlamaLoRA is LoRA fine-tuning (PEFT's defaults for Llama: r 8,
// alpha 32, dropout 0.1 on q_proj and v_proj) of a frozen base with
// seeded synthetic weights, AdamW at 2e-4 with clipping at 1: one op is an
// update on one micro-batch of full-length sequences (forward, loss,
// backward, clipping, AdamW). The base is bf16 on GPUs (adapters F32, as
// PEFT under autocast) and f32 on CPUs. tok/s is batch·seq over the step
// time; rel-err is the tiny golden's first update (loss, gradients,
// adapter) in the same precision on the same device.
func BenchmarkLlamaLoRA(b *testing.B) {
	golden, err := loadLoRAGolden("tiny")
	if err != nil {
		b.Fatal(err)
	}
	for _, dev := range devicesWith[kernels.DecoderBackward]() {
		name, cfg, p, batches, seq := loraBenchModel(dev, golden.cfg)
		for _, batch := range batches {
			b.Run(fmt.Sprintf("dev=%s/dtype=%v/model=%s/batch=%d/seq=%d", dev.Name(), p, name, batch, seq), func(b *testing.B) {
				loraBench(b, dev, cfg, p, batch, seq, golden)
			})
		}
	}
}

func loraBench(b *testing.B, dev kernels.Backend, cfg llama.Config, p nn.Precision, batch, seq int, golden *loraGolden) {
	m, err := llama.Load(dev, cfg, llama.Synthetic(llamaSeed), p)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	o := llama.TrainOptions{
		Batch: batch, Seq: seq, LoRA: lora.Default(), Seed: llamaSeed, MaxGradNorm: 1,
		AdamW:    nn.AdamW{LR: 2e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		Schedule: nn.Schedule{Kind: "constant"},
	}
	tr, err := llama.NewTrainer(m, o)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	r := rand.New(rand.NewPCG(llamaSeed, uint64(batch)))
	tb := llama.TrainBatch{IDs: make([]int32, batch*seq)}
	for i := range tb.IDs {
		tb.IDs[i] = int32(3 + r.IntN(cfg.VocabSize-3))
	}
	tb.Labels = tb.IDs
	w := cfg.LoRAStepWork(batch, seq, p.DType().Size(), o.LoRA.R, o.LoRA.Targets, false)
	var last llama.StepResult
	op := func() error {
		last, err = tr.Step(tb)
		return err
	}
	verify := func() (float64, error) {
		res, _, err := golden.run(dev, p, 1)
		if err != nil {
			return 0, err
		}
		_, worst := res.worst()
		return worst, nil
	}
	zbench.Measure(b, zbench.Bench{
		Dev: dev, Op: op, Verify: verify, MaxRelErr: loraTolerance(p),
		Work: zbench.Workload{FLOPs: w.FLOPs, Bytes: w.Bytes, DType: p.DType(), Items: float64(batch * seq), ItemUnit: "tok/s"},
	})
	b.Logf("loss %.4f after %d updates", last.Loss, tr.Updates())
}
