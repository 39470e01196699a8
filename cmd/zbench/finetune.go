package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/checkpoint"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/lora"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/models/sft"
	"github.com/zbench/zbench/models/tokenizer"
)

const finetuneSynopsis = "--model DIR|tinyllama-synthetic --data alpaca.json|data.jsonl --out ADAPTER_DIR [--steps 50] [--batch 4] [--grad-accum 1] [--seq 512] [--pack] [--lr 2e-4] [--lr-scheduler linear|cosine|constant] [--warmup 0] [--weight-decay 0] [--max-grad-norm 1] [--lora-r 8] [--lora-alpha 32] [--lora-dropout 0.1] [--lora-targets q_proj,v_proj] [--rslora] [--adapter-init DIR] [--checkpointing] [--seed S] [--dtype auto|f32|f16|bf16] [--device cpu|cuda] [--save-every N] [--log FILE]"

const finetuneDoc = `
Finetune trains a LoRA adapter (Hugging Face PEFT's LoRA) on a frozen
Llama-family model: Alpaca instruction data (a JSON array of instruction,
input, output records, formatted with Stanford Alpaca's prompt templates,
the loss on the response and EOS only) or pre-tokenized JSONL (input_ids and
optional labels per line). Sequences are truncated and right-padded to
--seq, or packed into rows of --seq tokens with --pack.

The base stays in --dtype; the adapter, its gradients and AdamW's state are
float32. Each update accumulates --grad-accum micro-batches of --batch
sequences, clips the gradients' global norm to --max-grad-norm and steps
AdamW at the scheduled rate (transformers' schedulers: a linear warm-up of
--warmup updates, then linear, cosine or constant).

A progress line shows step, loss, tokens per second and the time left (on a
terminal; elsewhere a line every --log-every steps). Every step's loss,
learning rate, gradient norm and speed go to --log as JSON lines. The
adapter is written to --out in PEFT's format (adapter_config.json and
adapter_model.safetensors) at the end and every --save-every steps, each
file atomically. --adapter-init starts from an existing adapter instead of
PEFT's initialisation, to compare runs step for step with another
implementation.`

// finetuneLog is one line of the JSONL log.
type finetuneLog struct {
	Step     int     `json:"step"`
	Loss     float64 `json:"loss"`
	LR       float64 `json:"lr"`
	GradNorm float64 `json:"grad_norm"`
	Tokens   int     `json:"tokens"` // learned tokens of the step
	StepMS   float64 `json:"step_ms"`
	TokS     float64 `json:"tok_s"` // sequence tokens processed per second
	Epoch    int     `json:"epoch"`
}

func runFinetune(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("finetune", finetuneSynopsis, finetuneDoc, stderr)
	var (
		model     = fs.String("model", "", "the base checkpoint `directory`, or "+syntheticTinyLlama+" (required)")
		config    = fs.String("config", "", "the model's config.json `file` (default: the checkpoint's)")
		tokPath   = fs.String("tokenizer", "", "tokenizer.json or tokenizer.model `file` (default: the checkpoint's)")
		data      = fs.String("data", "", "training data: an Alpaca .json `file` or a pre-tokenized .jsonl (required)")
		out       = fs.String("out", "", "the adapter's output `directory` (required)")
		steps     = fs.Int("steps", 50, "updates to make")
		batch     = fs.Int("batch", 4, "sequences per micro-batch")
		accum     = fs.Int("grad-accum", 1, "micro-batches per update (gradient accumulation)")
		seq       = fs.Int("seq", 512, "tokens per sequence")
		pack      = fs.Bool("pack", false, "pack examples into full rows of --seq tokens instead of padding each")
		lr        = fs.Float64("lr", 2e-4, "peak learning rate")
		sched     = fs.String("lr-scheduler", "linear", "learning-rate schedule after the warm-up: "+strings.Join(nn.Schedules, ", "))
		warmup    = fs.Int("warmup", 0, "warm-up updates")
		decay     = fs.Float64("weight-decay", 0, "AdamW's decoupled weight decay")
		maxNorm   = fs.Float64("max-grad-norm", 1, "clip the gradients' global norm to this; 0 does not clip")
		rank      = fs.Int("lora-r", 8, "LoRA rank")
		alpha     = fs.Float64("lora-alpha", 32, "LoRA alpha (the scale is alpha/r)")
		dropout   = fs.Float64("lora-dropout", 0.1, "dropout on the LoRA branch's input")
		targets   = fs.String("lora-targets", "q_proj,v_proj", "adapted modules, comma-separated (q_proj k_proj v_proj o_proj gate_proj up_proj down_proj) or all-linear")
		rslora    = fs.Bool("rslora", false, "rank-stabilised scale alpha/√r")
		init      = fs.String("adapter-init", "", "start from this adapter `directory` instead of PEFT's initialisation")
		ckpt      = fs.Bool("checkpointing", false, "recompute each layer's activations in the backward pass (less memory, one more forward)")
		seed      = fs.Uint64("seed", 42, "seed of the data order, the adapter's initialisation and dropout")
		dtype     = fs.String("dtype", "auto", "the base's precision: auto (the checkpoint's torch_dtype), f32, f16 or bf16")
		device    = fs.String("device", "cpu", "the device: "+strings.Join(knownDevices, " or "))
		saveEvery = fs.Int("save-every", 0, "also write the adapter every N updates; 0: only at the end")
		logPath   = fs.String("log", "", "the JSONL log `file` (default: OUT/train_log.jsonl)")
		logEvery  = fs.Int("log-every", 10, "progress lines every N updates when not on a terminal")
	)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case *model == "":
		return usageErrorf("missing required flag --model (see 'zbench finetune -h')")
	case *data == "":
		return usageErrorf("missing required flag --data (see 'zbench finetune -h')")
	case *out == "":
		return usageErrorf("missing required flag --out (see 'zbench finetune -h')")
	case *steps <= 0 || *batch <= 0 || *accum <= 0 || *seq < 2:
		return usageErrorf("--steps %d, --batch %d, --grad-accum %d, --seq %d: want steps, batch and grad-accum > 0 and seq ≥ 2", *steps, *batch, *accum, *seq)
	case !(*lr > 0):
		return usageErrorf("--lr %v, want > 0", *lr)
	case *saveEvery < 0 || *logEvery <= 0:
		return usageErrorf("--save-every %d, --log-every %d: want ≥ 0 and > 0", *saveEvery, *logEvery)
	case !slices.Contains(llamaDTypes, *dtype):
		return usageErrorf("unknown --dtype %q (want %s)", *dtype, strings.Join(llamaDTypes, ", "))
	}
	schedule := nn.Schedule{Kind: *sched, Warmup: *warmup, Total: *steps}
	if err := schedule.Validate(); err != nil {
		return usageError{err}
	}
	tlist, err := lora.ParseTargets(*targets)
	if err != nil {
		return usageErrorf("--lora-targets: %v", err)
	}
	lcfg := lora.Config{R: *rank, Alpha: *alpha, Dropout: *dropout, Targets: tlist, RSLoRA: *rslora, BaseModel: *model}
	if err := lcfg.Validate(); err != nil {
		return usageError{err}
	}
	// What needs no weights is checked before the model loads.
	if _, err := os.Stat(*data); err != nil {
		return err
	}
	if *model == syntheticTinyLlama && *tokPath == "" && isAlpaca(*data) {
		return fmt.Errorf("%s: Alpaca data needs a tokenizer: %s has none (give --tokenizer)", *data, syntheticTinyLlama)
	}
	dev, err := openDevice(*device)
	if err != nil {
		return err
	}
	m, tok, tokErr, err := openGenerator(dev, *model, *config, *tokPath, *dtype, false)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()

	examples, err := readTrainingData(*data, tok, tokErr)
	if err != nil {
		return err
	}
	loader, err := sft.NewLoader(examples, *batch, *seq, 0, *pack, *seed)
	if err != nil {
		return fmt.Errorf("%s: %w", *data, err)
	}
	opts := llama.TrainOptions{
		Batch: *batch, Seq: *seq, LoRA: lcfg, Seed: *seed, Checkpoint: *ckpt, MaxGradNorm: *maxNorm, Schedule: schedule,
		AdamW: nn.AdamW{LR: float32(*lr), Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: float32(*decay)},
	}
	if *init != "" {
		c := m.Config
		ad, err := lora.Load(*init, c.NumHiddenLayers, c.ModuleDims)
		if err != nil {
			return fmt.Errorf("--adapter-init: %w", err)
		}
		if !sameLoRA(ad.Config, lcfg) {
			// The adapter's own hyper-parameters win: it is the run to compare with.
			fmt.Fprintf(stderr, "zbench finetune: using %s's r %d, alpha %g, targets %s\n", *init, ad.Config.R, ad.Config.Alpha, strings.Join(ad.Config.Targets, ","))
			ad.Config.Dropout = lcfg.Dropout
			opts.LoRA = ad.Config
		}
		opts.Adapter = ad.Source()
	}
	tr, err := llama.NewTrainer(m, opts)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, tr.Close()) }()

	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if *logPath == "" {
		*logPath = filepath.Join(*out, "train_log.jsonl")
	}
	logf, err := os.Create(*logPath)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, logf.Close()) }()
	enc := json.NewEncoder(logf)

	save := func() error {
		ad, err := tr.Adapter()
		if err != nil {
			return err
		}
		return ad.Save(*out)
	}
	prog := newStepProgress(stderr, *steps, *logEvery)
	fmt.Fprintf(stdout, "fine-tuning %s (%s, %s) with LoRA r %d, alpha %g, dropout %g on %s: %d updates of %d×%d×%d tokens, %d examples (%d dropped)\n",
		*model, dev.Name(), m.Precision, opts.LoRA.R, opts.LoRA.Alpha, opts.LoRA.Dropout, strings.Join(opts.LoRA.Targets, ","),
		*steps, *accum, *batch, *seq, len(examples), loader.Dropped())
	dev.ResetPeak()
	var total time.Duration
	var first, last llama.StepResult
	for step := 1; step <= *steps; step++ {
		micro := make([]llama.TrainBatch, *accum)
		for i := range micro {
			b := loader.Next()
			micro[i] = llama.TrainBatch{IDs: b.IDs, Labels: b.Labels}
		}
		start := time.Now()
		res, err := tr.Step(micro...)
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		d := time.Since(start)
		total += d
		if step == 1 {
			first = res
		}
		last = res
		rec := finetuneLog{Step: step, Loss: res.Loss, LR: res.LR, GradNorm: res.GradNorm, Tokens: res.Tokens,
			StepMS: ms(d), TokS: float64(*accum**batch**seq) / d.Seconds(), Epoch: loader.Epoch()}
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("log %s: %w", *logPath, err)
		}
		prog.show(rec, total)
		if *saveEvery > 0 && step%*saveEvery == 0 && step < *steps {
			if err := save(); err != nil {
				return err
			}
		}
	}
	prog.done()
	if err := save(); err != nil {
		return err
	}
	tokens := float64(*steps * *accum * *batch * *seq)
	fmt.Fprintf(stdout, "loss        %.4f → %.4f over %d updates\n", first.Loss, last.Loss, *steps)
	fmt.Fprintf(stdout, "speed       %.1f ms per update, %.1f tok/s\n", ms(total)/float64(*steps), tokens/total.Seconds())
	fmt.Fprintf(stdout, "peak memory %.1f MiB (device pool high-water mark)\n", float64(max(dev.MemStats().PeakBytes, 0))/(1<<20))
	fmt.Fprintf(stdout, "adapter     %s (log %s)\n", *out, *logPath)
	return nil
}

// sameLoRA reports whether two configs give the same adapter shapes and
// scale.
func sameLoRA(a, b lora.Config) bool {
	return a.R == b.R && a.Alpha == b.Alpha && a.RSLoRA == b.RSLoRA && slices.Equal(a.Targets, b.Targets)
}

// readTrainingData reads --data: Alpaca JSON needs the tokenizer.
func readTrainingData(path string, tok *tokenizer.Tokenizer, tokErr error) ([]sft.Example, error) {
	if isAlpaca(path) && tok == nil {
		return nil, fmt.Errorf("%s: Alpaca data needs a tokenizer: %w (give --tokenizer)", path, tokErr)
	}
	if tok == nil {
		return sft.ReadJSONL(path)
	}
	return sft.Read(path, tok)
}

// isAlpaca reports whether the data file is Alpaca JSON (by its name).
func isAlpaca(path string) bool { return strings.EqualFold(filepath.Ext(path), ".json") }

// stepProgress prints training progress: one line redrawn on a terminal,
// else a line every few steps.
type stepProgress struct {
	w            io.Writer
	tty          bool
	steps, every int
}

func newStepProgress(w io.Writer, steps, every int) *stepProgress {
	f, ok := w.(*os.File)
	return &stepProgress{w: w, tty: ok && term.IsTerminal(int(f.Fd())), steps: steps, every: every}
}

func (p *stepProgress) show(r finetuneLog, elapsed time.Duration) {
	if !p.tty && r.Step%p.every != 0 && r.Step != p.steps {
		return
	}
	eta := time.Duration(float64(elapsed) / float64(r.Step) * float64(p.steps-r.Step)).Round(time.Second)
	line := fmt.Sprintf("step %d/%d  loss %.4f  lr %.3g  grad-norm %.3g  %.1f tok/s  ETA %s",
		r.Step, p.steps, r.Loss, r.LR, r.GradNorm, r.TokS, eta)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *stepProgress) done() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

const mergeSynopsis = "--model DIR --adapter ADAPTER_DIR --out DIR [--config FILE]"

const mergeDoc = `
Merge folds a LoRA adapter (PEFT's format, as finetune writes it) into its
base checkpoint: every adapted weight becomes W + scale·B·A, computed in
float32 and rounded once to the checkpoint's dtype. It writes a checkpoint
directory that generate and infer load: the weight files under their names
(with the shard index, if any), config.json and the tokenizer files.`

// checkpointExtras are the files of a checkpoint directory that merge
// copies beside the merged weights.
var checkpointExtras = []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer.model",
	"tokenizer_config.json", "special_tokens_map.json", checkpoint.IndexName}

func runMerge(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("merge", mergeSynopsis, mergeDoc, stderr)
	var (
		model   = fs.String("model", "", "the base checkpoint `directory` (required)")
		config  = fs.String("config", "", "the model's config.json `file` (default: the checkpoint's)")
		adapter = fs.String("adapter", "", "the adapter `directory` (required)")
		out     = fs.String("out", "", "the merged checkpoint's `directory` (required)")
	)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case *model == "" || *adapter == "" || *out == "":
		return usageErrorf("--model, --adapter and --out are required (see 'zbench merge -h')")
	case *model == syntheticTinyLlama:
		return usageErrorf("merge needs a checkpoint directory: %s has no files to merge into", syntheticTinyLlama)
	}
	files, err := checkpoint.Resolve(*model, *config)
	if err != nil {
		return err
	}
	cfg, err := llama.LoadConfig(files.Config)
	if err != nil {
		return err
	}
	ad, err := lora.Load(*adapter, cfg.NumHiddenLayers, cfg.ModuleDims)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	byName := map[string]lora.Target{}
	for _, t := range ad.Targets {
		byName[t.BaseName()] = t
	}
	merged := 0
	for _, path := range files.Weights {
		n, err := mergeFile(path, filepath.Join(*out, filepath.Base(path)), ad, byName)
		if err != nil {
			return err
		}
		merged += n
	}
	if merged != len(ad.Targets) {
		return fmt.Errorf("%s: %d of the adapter's %d target weights are in the checkpoint", *model, merged, len(ad.Targets))
	}
	dir := filepath.Dir(files.Weights[0])
	for _, name := range checkpointExtras {
		src := filepath.Join(dir, name)
		if name == "config.json" {
			src = files.Config
		}
		if err := copyFile(src, filepath.Join(*out, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	fmt.Fprintf(stdout, "merged %d weights of %s (LoRA r %d, scale %g) into %s\n", merged, *adapter, ad.Config.R, ad.Config.Scale(), *out)
	return nil
}

// mergeFile writes the safetensors file at src to dst with the adapter's
// targets merged, each in its own dtype; it returns how many it merged.
func mergeFile(src, dst string, ad *lora.Adapter, targets map[string]lora.Target) (int, error) {
	f, err := safetensors.Open(src)
	if err != nil {
		return 0, err
	}
	var ts []safetensors.Tensor
	merged := 0
	for _, name := range f.Tensors() {
		t, err := f.Tensor(name)
		if err != nil {
			return 0, err
		}
		if tg, ok := targets[name]; ok {
			w, err := t.Float32()
			if err != nil {
				return 0, fmt.Errorf("%s: %s: %w", src, name, err)
			}
			if err := ad.Merge(tg, w); err != nil {
				return 0, fmt.Errorf("%s: %s: %w", src, name, err)
			}
			dt, err := t.KernelDType()
			if err != nil {
				return 0, fmt.Errorf("%s: %s: %w", src, name, err)
			}
			t.Data = make([]byte, len(w)*dt.Size())
			if err := kernels.EncodeFloat32(dt, t.Data, w); err != nil {
				return 0, fmt.Errorf("%s: %s: %w", src, name, err)
			}
			merged++
		}
		ts = append(ts, t)
	}
	out, err := createAtomic(dst)
	if err != nil {
		return 0, err
	}
	return merged, out.commit(ts, f.Metadata())
}

// copyFile copies src to dst.
func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}
