package bench_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/zbench"
)

// Files written by testdata/reference/bert.py (make golden).
const (
	bertGolden      = "../testdata/golden/bert.safetensors"
	bertTrainGolden = "../testdata/golden/bert-train.safetensors"
	bertTinyDir     = "../testdata/golden/bert-tiny"
	// bertSeed is the seed of the synthetic BERT-base weights of the
	// golden's base_* cases and of the benchmarks.
	bertSeed = 20261121
)

// bertCase is one case of the BERT golden file.
type bertCase struct {
	Name    string
	Config  string `json:"config"` // tiny or base
	Weights string `json:"weights"`
	Seed    uint64 `json:"seed"`
	Padded  bool   `json:"padded"`

	Batch, Seq int
	In         bert.Inputs
	Hidden     []float32 // last_hidden_state [B, S, H]
	Pooled     []float32 // pooler_output [B, H]
}

// bertPrecisions are the precisions a model runs in, with the relative
// error each must reach against the float64 reference. bfloat16 keeps 8
// bits of mantissa: through BERT-base's 12 layers PyTorch's own bfloat16
// model (model.to(torch.bfloat16)) is 1.46e-2 off the golden base case,
// so bf16 has the kernels' bf16 tolerance, 1.6e-2.
var bertPrecisions = []struct {
	p   nn.Precision
	tol float64
}{{nn.F32, 1e-4}, {nn.F16, 1e-2}, {nn.BF16, kernels.Tolerance(kernels.BF16)}, {nn.Mixed, 1e-2}}

func int32s(f *safetensors.File, name string) ([]int32, []int, error) {
	t, err := f.Tensor(name)
	if err != nil {
		return nil, nil, err
	}
	v, err := t.Int32()
	return v, t.Shape, err
}

func float32s(f *safetensors.File, name string) ([]float32, error) {
	t, err := f.Tensor(name)
	if err != nil {
		return nil, err
	}
	return t.Float32()
}

// loadBERTCases reads every case of the BERT golden file.
func loadBERTCases(path string) ([]*bertCase, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	var cases []*bertCase
	for key, val := range f.Metadata() {
		if key == "format" || key == "reference" || key == "script" {
			continue
		}
		c := &bertCase{Name: key}
		if err := json.Unmarshal([]byte(val), c); err != nil {
			return nil, fmt.Errorf("%s: case %s: %w", path, key, err)
		}
		var shape []int
		if c.In.IDs, shape, err = int32s(f, key+"/input_ids"); err != nil {
			return nil, err
		}
		if len(shape) != 2 {
			return nil, fmt.Errorf("%s: %s/input_ids has shape %v, want [batch, seq]", path, key, shape)
		}
		c.Batch, c.Seq = shape[0], shape[1]
		if c.In.TypeIDs, _, err = int32s(f, key+"/token_type_ids"); err != nil {
			return nil, err
		}
		if c.In.Mask, _, err = int32s(f, key+"/attention_mask"); err != nil {
			return nil, err
		}
		if c.Hidden, err = float32s(f, key+"/last_hidden_state"); err != nil {
			return nil, err
		}
		if c.Pooled, err = float32s(f, key+"/pooler_output"); err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no cases", path)
	}
	return cases, nil
}

// source returns the case's config and weights.
func (c *bertCase) source() (bert.Config, nn.Source, error) {
	if c.Weights == "synthetic" {
		if c.Config != "base" {
			return bert.Config{}, nil, fmt.Errorf("case %s: synthetic weights of config %q", c.Name, c.Config)
		}
		return bert.Base(), bert.Synthetic(c.Seed), nil
	}
	cfg, err := bert.LoadConfig(filepath.Join(filepath.Dir(filepath.Join("..", c.Weights)), "config.json"))
	if err != nil {
		return bert.Config{}, nil, err
	}
	src, err := bert.OpenCheckpoint(filepath.Join("..", c.Weights))
	return cfg, src, err
}

// runBERT runs the case through m and returns the relative errors of
// last_hidden_state and pooler_output.
func runBERT(m *bert.Model, c *bertCase) (hidden, pooled float64, err error) {
	f, err := m.NewForward(c.Batch, c.Seq)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	if err := f.SetInputs(c.In); err != nil {
		return 0, 0, err
	}
	if err := f.Run(); err != nil {
		return 0, 0, err
	}
	h, err := f.LastHidden()
	if err != nil {
		return 0, 0, err
	}
	p, err := f.Pooled()
	if err != nil {
		return 0, 0, err
	}
	hidden, _ = kernels.RelErr(widen(h), widen(c.Hidden))
	pooled, _ = kernels.RelErr(widen(p), widen(c.Pooled))
	return hidden, pooled, nil
}

// TestBERTGolden runs every golden case — the tiny checkpoint and
// BERT-base with synthetic weights, padded and not — on every device in
// every precision.
func TestBERTGolden(t *testing.T) {
	cases, err := loadBERTCases(bertGolden)
	require.NoError(t, err)
	for _, dev := range devices {
		for _, c := range cases {
			cfg, src, err := c.source()
			require.NoError(t, err)
			for _, pr := range bertPrecisions {
				t.Run(fmt.Sprintf("dev=%s/%s/%v", dev.Name(), c.Name, pr.p), func(t *testing.T) {
					m, err := bert.Load(dev, cfg, src, pr.p)
					require.NoError(t, err)
					defer func() { require.NoError(t, m.Close()) }()
					hidden, pooled, err := runBERT(m, c)
					require.NoError(t, err)
					t.Logf("rel-err last_hidden_state %.3g, pooler_output %.3g", hidden, pooled)
					assert.LessOrEqual(t, hidden, pr.tol, "last_hidden_state")
					assert.LessOrEqual(t, pooled, pr.tol, "pooler_output")
				})
			}
		}
	}
}

// TestBERTInt8Golden quantizes BERT-base (synthetic weights) and the tiny
// checkpoint to W8A8 int8 on every device that has kernels.Quant and
// holds every golden case of the model to bertInt8Tolerance of the float64
// reference; the per-layer report must show every weight and input
// quantized with a bounded error, in about half float16's memory.
func TestBERTInt8Golden(t *testing.T) {
	cases, err := loadBERTCases(bertGolden)
	require.NoError(t, err)
	for _, dev := range devices {
		if _, err := kernels.Group[kernels.Quant](dev); err != nil {
			continue
		}
		models := map[string]*bert.Model{} // one quantized model per config and weights
		parent := t
		for _, c := range cases {
			cfg, src, err := c.source()
			require.NoError(t, err)
			t.Run(fmt.Sprintf("dev=%s/%s", dev.Name(), c.Name), func(t *testing.T) {
				key := c.Config + "/" + c.Weights
				m := models[key]
				if m == nil {
					var rep []quant.LinearReport
					m, rep, err = int8BERT(dev, cfg, src)
					require.NoError(t, err)
					parent.Cleanup(func() { assert.NoError(parent, m.Close()) })
					models[key] = m
					require.Len(t, rep, 6*cfg.NumHiddenLayers, "one report per linear layer")
					for _, r := range rep {
						assert.Greater(t, r.WeightSQNR, 30.0, "%s: weight SQNR", r.Name)
						assert.Greater(t, r.InputSQNR, 15.0, "%s: input SQNR", r.Name)
						assert.Greater(t, r.InputAmax, float32(0), "%s: input amax", r.Name)
						assert.Less(t, float64(r.Bytes), 0.6*float64(r.F16Bytes), "%s: int8 bytes (with the scales) against float16's", r.Name)
					}
				}
				require.True(t, m.Quantized())
				hidden, pooled, err := runBERT(m, c)
				require.NoError(t, err)
				t.Logf("rel-err last_hidden_state %.3g, pooler_output %.3g", hidden, pooled)
				assert.LessOrEqual(t, hidden, bertInt8Tolerance, "last_hidden_state")
				assert.LessOrEqual(t, pooled, bertInt8Tolerance, "pooler_output")
			})
		}
	}
}

// trainGolden is the training golden: the tiny checkpoint, one batch,
// the reference's losses over 10 AdamW steps, every gradient after the
// first backward and every parameter after the first update.
type trainGolden struct {
	file   *safetensors.File
	opt    nn.AdamW
	steps  int
	batch  bert.Batch
	B, S   int
	losses []float32
}

func loadTrainGolden() (*trainGolden, error) {
	f, err := safetensors.Open(bertTrainGolden)
	if err != nil {
		return nil, err
	}
	var hp struct {
		LR, Beta1, Beta2, Eps float32
		WeightDecay           float32 `json:"weight_decay"`
		Steps                 int
		Decay                 string
	}
	if err := json.Unmarshal([]byte(f.Metadata()["train"]), &hp); err != nil {
		return nil, fmt.Errorf("%s: metadata train: %w", bertTrainGolden, err)
	}
	if hp.Decay != "dim>=2" {
		return nil, fmt.Errorf("%s: weight decay rule %q, want dim>=2", bertTrainGolden, hp.Decay)
	}
	g := &trainGolden{file: f, steps: hp.Steps,
		opt: nn.AdamW{LR: hp.LR, Beta1: hp.Beta1, Beta2: hp.Beta2, Eps: hp.Eps, WeightDecay: hp.WeightDecay}}
	var shape []int
	if g.batch.IDs, shape, err = int32s(f, "input_ids"); err != nil {
		return nil, err
	}
	g.B, g.S = shape[0], shape[1]
	if g.batch.TypeIDs, _, err = int32s(f, "token_type_ids"); err != nil {
		return nil, err
	}
	if g.batch.Labels, _, err = int32s(f, "labels"); err != nil {
		return nil, err
	}
	if g.losses, err = float32s(f, "loss"); err != nil {
		return nil, err
	}
	if len(g.losses) != g.steps {
		return nil, fmt.Errorf("%s: %d losses for %d steps", bertTrainGolden, len(g.losses), g.steps)
	}
	return g, nil
}

// newTrainer makes a trainer of the golden's tiny model on dev.
func (g *trainGolden) newTrainer(dev kernels.Backend) (*bert.Trainer, error) {
	cfg, err := bert.LoadConfig(filepath.Join(bertTinyDir, "config.json"))
	if err != nil {
		return nil, err
	}
	src, err := bert.OpenCheckpoint(filepath.Join(bertTinyDir, "model.safetensors"))
	if err != nil {
		return nil, err
	}
	return bert.NewTrainer(dev, cfg, src, bert.TrainOptions{Batch: g.B, Seq: g.S, Opt: g.opt})
}

// compare runs tr's first step and returns the relative errors of the
// loss and of each gradient and updated parameter against the golden,
// keyed by role and name.
func (g *trainGolden) compare(tr *bert.Trainer) (loss float32, errs map[string]float64, err error) {
	if loss, err = tr.Step(g.batch); err != nil {
		return 0, nil, err
	}
	errs = map[string]float64{"loss": math.Abs(float64(loss-g.losses[0])) / math.Abs(float64(g.losses[0]))}
	for _, p := range tr.Params() {
		name := checkpointName(p.Name)
		for _, c := range []struct {
			role string
			get  func(string) ([]float32, error)
		}{{"grad/", tr.Grad}, {"step1/", tr.Param}} {
			want, err := float32s(g.file, c.role+name)
			if err != nil {
				return 0, nil, err
			}
			got, err := c.get(p.Name)
			if err != nil {
				return 0, nil, err
			}
			rel, maxAbs := kernels.RelErr(widen(got), widen(want))
			if maxAbs <= zeroGrad {
				rel = 0 // zero in exact arithmetic: compared by max-abs
			}
			errs[c.role+name] = rel
		}
	}
	return loss, errs, nil
}

// TestBERTTrainGolden checks one training step's loss, every gradient and
// every updated parameter against the reference, then that the loss over
// ten steps follows the reference's down.
func TestBERTTrainGolden(t *testing.T) {
	g, err := loadTrainGolden()
	require.NoError(t, err)
	for _, dev := range devices {
		t.Run("dev="+dev.Name(), func(t *testing.T) {
			tr, err := g.newTrainer(dev)
			require.NoError(t, err)
			defer func() { require.NoError(t, tr.Close()) }()
			loss, errs, err := g.compare(tr)
			require.NoError(t, err)
			require.Len(t, errs, 1+2*len(tr.Params()))
			for name, rel := range errs {
				assert.LessOrEqual(t, rel, 1e-4, name)
			}
			losses := []float32{loss}
			for range g.steps - 1 {
				l, err := tr.Step(g.batch)
				require.NoError(t, err)
				losses = append(losses, l)
			}
			t.Logf("losses %v\nreference %v", losses, g.losses)
			for i := range losses {
				assert.InEpsilon(t, g.losses[i], losses[i], 1e-3, "loss of step %d", i+1)
			}
			assert.Less(t, losses[len(losses)-1], 0.9*losses[0], "the loss falls over %d steps", g.steps)
		})
	}
}

// zeroGrad is the max-abs difference under which a gradient counts as
// matching whatever its relative error: the key projections' bias has a
// zero gradient in exact arithmetic (softmax does not see a shift shared
// by a row of scores), so both sides hold rounding noise (≈ 1e-12 here
// against gradients of ≈ 1e-3).
const zeroGrad = 1e-9

// checkpointName is a trained parameter's name in the checkpoint and the
// training golden.
func checkpointName(p string) string {
	if strings.HasPrefix(p, "cls.") {
		return p
	}
	return "bert." + p
}

// bertShapes are BenchmarkBERT's (batch, seq) points on dev.
func bertShapes(dev kernels.Backend) [][2]int {
	switch {
	case testing.Short():
		return [][2]int{{1, 128}}
	case dev.Info().Kind == kernels.GPU:
		return [][2]int{{1, 128}, {1, 384}, {8, 128}, {8, 384}, {32, 128}, {32, 384}}
	}
	return [][2]int{{1, 128}, {1, 384}, {8, 128}}
}

// bertFLOPs is the matmul arithmetic of a forward pass over n sequences
// of s tokens: the projections and feed-forward layers, q·kᵀ and ·v, the
// pooler.
func bertFLOPs(c bert.Config, n, s int) float64 {
	H, I, L := float64(c.HiddenSize), float64(c.IntermediateSize), float64(c.NumHiddenLayers)
	tokens := float64(n * s)
	return L*(tokens*(8*H*H+4*H*I)+4*float64(n)*float64(s)*float64(s)*H) + 2*float64(n)*H*H
}

// BenchmarkBERT is BERT-base inference (synthetic weights) over batch and
// sequence length in each precision. One op is a forward pass of the
// batch: on devices that capture graphs, one launch of the captured
// forward. rel-err is last_hidden_state of the golden base_unpadded case
// against the PyTorch reference, computed by the same model.
func BenchmarkBERT(b *testing.B) {
	cfg := bert.Base()
	cases, err := loadBERTCases(bertGolden)
	if err != nil {
		b.Fatal(err)
	}
	var golden *bertCase
	for _, c := range cases {
		if c.Name == "base_unpadded" {
			golden = c
		}
	}
	if golden == nil || golden.Seed != bertSeed {
		b.Fatalf("%s: no base_unpadded case with seed %d", bertGolden, bertSeed)
	}
	for _, dev := range devices {
		precisions := []nn.Precision{nn.F32, nn.F16, nn.BF16, nn.Mixed}
		if testing.Short() {
			precisions = precisions[:1]
		}
		for _, pr := range precisions {
			var m *bert.Model
			for _, s := range bertShapes(dev) {
				if dev.Info().Kind == kernels.CPU && pr != nn.F32 && s != [2]int{1, 128} {
					continue // 16-bit on CPU: one point (no 16-bit arithmetic there)
				}
				b.Run(fmt.Sprintf("dev=%s/dtype=%v/batch=%d/seq=%d", dev.Name(), pr, s[0], s[1]), func(b *testing.B) {
					if m == nil {
						if m, err = bert.Load(dev, cfg, bert.Synthetic(bertSeed), pr); err != nil {
							b.Fatal(err)
						}
					}
					bertBench(b, m, golden, s[0], s[1], pr.DType(), bertTolerance(pr))
				})
			}
			if m != nil {
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
			}
		}
		benchBERTInt8(b, dev, golden)
		benchBERTFP8(b, dev, golden)
	}
}

// benchBERTFP8 is BenchmarkBERT's dtype=fp8: the model of
// bert.Model.QuantizeFP8 (E4M3 linears, weights per output channel and
// inputs per token; float32 around them, the attention core in float16 on
// GPUs) at the int8 shapes on devices with kernels.FP8, not in -short
// mode. On CPUs FP8 is an emulation (codes widened to float32), run at
// the first shape only: its time is not FP8's speed, its rel-err is FP8's
// accuracy.
func benchBERTFP8(b *testing.B, dev kernels.Backend, golden *bertCase) {
	if _, err := kernels.Group[kernels.FP8](dev); err != nil || testing.Short() {
		return
	}
	shapes := bertShapes(dev)
	if dev.Info().Kind != kernels.GPU {
		shapes = shapes[:1]
	}
	var m *bert.Model
	defer func() {
		if m != nil {
			if err := m.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}()
	for _, s := range shapes {
		b.Run(fmt.Sprintf("dev=%s/dtype=fp8/batch=%d/seq=%d", dev.Name(), s[0], s[1]), func(b *testing.B) {
			if m == nil {
				prec := nn.F32
				if dev.Info().Kind == kernels.GPU {
					prec = nn.Mixed
				}
				var err error
				if m, err = bert.Load(dev, bert.Base(), bert.Synthetic(bertSeed), prec); err != nil {
					b.Fatal(err)
				}
				if _, err := m.QuantizeFP8(); err != nil {
					b.Fatal(err)
				}
			}
			bertBench(b, m, golden, s[0], s[1], kernels.E4M3, benchTolerance("BenchmarkBERT", "fp8"))
		})
	}
}

// benchBERTInt8 is BenchmarkBERT's dtype=int8: the W8A8 static model of
// bert.Model.Quantize (float32 around the int8 linears, the attention core
// in float16 on GPUs), calibrated as int8BERT does, at every shape on
// CPUs and the f32 shapes' first three on GPUs. rel-err is against the
// float64 reference, as for the float models: the accuracy int8 costs.
func benchBERTInt8(b *testing.B, dev kernels.Backend, golden *bertCase) {
	var m *bert.Model
	defer func() {
		if m != nil {
			if err := m.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}()
	for _, s := range bertShapes(dev) {
		b.Run(fmt.Sprintf("dev=%s/dtype=int8/batch=%d/seq=%d", dev.Name(), s[0], s[1]), func(b *testing.B) {
			if m == nil {
				var err error
				if m, _, err = int8BERT(dev, bert.Base(), bert.Synthetic(bertSeed)); err != nil {
					b.Fatal(err)
				}
			}
			bertBench(b, m, golden, s[0], s[1], kernels.I8, bertInt8Tolerance)
		})
	}
}

// The calibration of the int8 BERT of the benchmarks and goldens: the
// histogram percentile (99.99, 2048 bins) over bertCalibBatches batches
// of one sequence of 128 random token ids, seeded apart from the
// benchmarks' inputs.
const (
	bertCalibMethod  = "percentile-hist"
	bertCalibBatches = 8
	bertCalibSeq     = 128
	// bertInt8Tolerance bounds the int8 model's rel-err against the
	// float64 reference.
	bertInt8Tolerance = 5e-2
)

// int8BERT loads cfg's weights from src on dev (float32; Mixed on GPUs)
// and quantizes it with the calibration above.
func int8BERT(dev kernels.Backend, cfg bert.Config, src nn.Source) (*bert.Model, []quant.LinearReport, error) {
	prec := nn.F32
	if dev.Info().Kind == kernels.GPU {
		prec = nn.Mixed
	}
	m, err := bert.Load(dev, cfg, src, prec)
	if err != nil {
		return nil, nil, err
	}
	cal := bert.Calibration{Batch: 1, Seq: min(bertCalibSeq, cfg.MaxPositionEmbeddings), NewObserver: func() quant.Observer {
		o, err := quant.New(bertCalibMethod, quant.Options{})
		if err != nil {
			panic(err) // the method and options are constants
		}
		return o
	}}
	for i := range bertCalibBatches {
		ids := make([]int32, cal.Seq)
		for j, u := range uniform(uint64(7000+i), kernels.F32, len(ids)) {
			ids[j] = int32((u + 1) / 2 * float32(cfg.VocabSize-1))
		}
		cal.Batches = append(cal.Batches, bert.Inputs{IDs: ids})
	}
	rep, err := m.Quantize(cal)
	if err != nil {
		return nil, nil, errors.Join(err, m.Close())
	}
	return m, rep, nil
}

func bertBench(b *testing.B, m *bert.Model, golden *bertCase, batch, seq int, dt kernels.DType, tol float64) {
	dev, cfg := m.Backend(), m.Config
	f, err := m.NewForward(batch, seq)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ids := make([]int32, batch*seq)
	for i, u := range uniform(uint64(batch*1000+seq), kernels.F32, len(ids)) {
		ids[i] = int32((u + 1) / 2 * float32(cfg.VocabSize-1))
	}
	if err := f.SetInputs(bert.Inputs{IDs: ids}); err != nil {
		b.Fatal(err)
	}
	run := captured(b, dev, f.Run)
	work := zbench.Workload{
		FLOPs:    bertFLOPs(cfg, batch, seq),
		Bytes:    float64(cfg.CountParams(true, false) * int64(dt.Size())),
		DType:    dt,
		Items:    float64(batch),
		ItemUnit: "seq/s",
	}
	verify := func() (float64, error) {
		h, err := f.LastHidden()
		if err != nil {
			return 0, err
		}
		for i, v := range h {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return 0, fmt.Errorf("last_hidden_state[%d] = %v", i, v)
			}
		}
		rel, _, err := runBERT(m, golden)
		return rel, err
	}
	zbench.Measure(b, zbench.Bench{Dev: dev, Work: work, Op: run, Verify: verify, MaxRelErr: tol})
}

func bertTolerance(p nn.Precision) float64 {
	for _, pr := range bertPrecisions {
		if pr.p == p {
			return pr.tol
		}
	}
	return 0
}

// bertData is the corpus BenchmarkBERTTrain trains on.
var bertData = flag.String("bert.data", "",
	"BenchmarkBERTTrain: a token-id or UTF-8 text file to train on (default: a seeded synthetic Zipf token stream)")

// bertTrainBatches are BenchmarkBERTTrain's batch sizes on dev.
func bertTrainBatches(dev kernels.Backend) []int {
	switch {
	case testing.Short():
		return []int{1}
	case dev.Info().Kind == kernels.GPU:
		return []int{8, 32}
	}
	return []int{8}
}

// BenchmarkBERTTrain is masked-LM training of the 6-layer encoder of
// bert.Train6 (66,987,066 parameters, 43.5M besides the token embeddings)
// with AdamW at seq 128: in float32 (dtype=f32), in bfloat16 mixed
// precision (bf16: float32 masters, bfloat16 weights, activations and
// gradients) and with FP8 linears over bf16 (fp8: E4M3 forward, E5M2
// gradients, delayed scaling; on devices with kernels.FP8, where on CPUs
// FP8 is an emulation whose time is not FP8's speed). One op is a step:
// forward, loss, backward, update. rel-err is, for f32, the largest
// relative error of the same code on this device against the
// reference's first step on the tiny training golden (loss, every
// gradient, every updated parameter); for bf16 and fp8, the distance of
// the end of a 200-step loss curve of the 6-layer model of
// TestBERTTrainCurve from the reference's bf16 curve (at most 1%).
func BenchmarkBERTTrain(b *testing.B) {
	const seq = 128
	cfg := bert.Train6()
	corpus, err := nn.SyntheticCorpus(bertSeed, cfg.VocabSize, 999, 1<<20) // past bert-base-uncased's special tokens
	if err != nil {
		b.Fatal(err)
	}
	if *bertData != "" {
		if corpus, err = nn.ReadCorpus(*bertData, cfg.VocabSize); err != nil {
			b.Fatal(err)
		}
	}
	golden, err := loadTrainGolden()
	if err != nil {
		b.Fatal(err)
	}
	curve, err := loadTrainCurve()
	if err != nil {
		b.Fatal(err)
	}
	for _, dev := range devices {
		for _, dtype := range []string{"f32", "bf16", "fp8"} {
			if _, err := kernels.Group[kernels.FP8](dev); err != nil && dtype == "fp8" {
				continue
			}
			for _, batch := range bertTrainBatches(dev) {
				b.Run(fmt.Sprintf("dev=%s/dtype=%s/batch=%d/seq=%d", dev.Name(), dtype, batch, seq), func(b *testing.B) {
					bertTrainBench(b, dev, cfg, corpus, dtype, batch, seq, golden, curve)
				})
			}
		}
	}
}

func bertTrainBench(b *testing.B, dev kernels.Backend, cfg bert.Config, corpus nn.Corpus, dtype string, batch, seq int,
	golden *trainGolden, curve *trainCurve) {
	o, err := curveOptions(dtype)
	if err != nil {
		b.Fatal(err)
	}
	o.Batch, o.Seq, o.Opt = batch, seq, bert.DefaultAdamW()
	tr, err := bert.NewTrainer(dev, cfg, bert.Synthetic(bertSeed), o)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	r := rand.New(rand.NewPCG(bertSeed, uint64(batch)))
	mask := bert.Masking{Rate: 0.15, MaskID: 103, Vocab: cfg.VocabSize} // bert-base-uncased's [MASK]
	batches := make([]bert.Batch, 4)
	for i := range batches {
		if batches[i], err = mask.Batch(corpus, r, batch, seq); err != nil {
			b.Fatal(err)
		}
	}
	masked := 0
	for _, l := range batches[0].Labels {
		if l != kernels.IgnoreIndex {
			masked++
		}
	}
	H, V := float64(cfg.HiddenSize), float64(cfg.VocabSize)
	head := 2*float64(masked)*H*H + 2*float64(masked)*H*V
	params := float64(cfg.CountParams(false, true))
	work := zbench.Workload{
		FLOPs:    3 * (bertFLOPs(cfg, batch, seq) - 2*float64(batch)*H*H + head), // no pooler; backward ≈ 2× forward
		Bytes:    16 * params,                                                    // parameter, gradient, two moments
		DType:    kernels.F32,
		Items:    float64(batch * seq),
		ItemUnit: "tok/s",
	}
	verify := func() (float64, error) {
		gt, err := golden.newTrainer(dev)
		if err != nil {
			return 0, err
		}
		defer gt.Close()
		_, errs, err := golden.compare(gt)
		if err != nil {
			return 0, err
		}
		worst := 0.0
		for _, e := range errs {
			worst = max(worst, e)
		}
		return worst, nil
	}
	tol := 1e-4
	if dtype != "f32" {
		work.DType, work.Bytes = kernels.BF16, 20*params // and the bfloat16 copy and gradient
		if o.FP8 != nil {
			work.DType = kernels.E4M3
		}
		verify = func() (float64, error) {
			loss, err := curve.run(dev, dtype)
			if err != nil {
				return 0, err
			}
			return curve.endErr(loss), nil
		}
		tol = curveTolerance
	}
	step, first, last := 0, float32(0), float32(0)
	op := func() error {
		loss, err := tr.Step(batches[step%len(batches)])
		if step == 0 {
			first = loss
		}
		step, last = step+1, loss
		return err
	}
	zbench.Measure(b, zbench.Bench{Dev: dev, Work: work, Op: op, Verify: verify, MaxRelErr: tol})
	b.Logf("loss %.4f at step %d (first %.4f)", last, step, first)
}
