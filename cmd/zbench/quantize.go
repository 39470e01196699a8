package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/zbench/zbench/kernels"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/checkpoint"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/resnet"
	"github.com/zbench/zbench/models/safetensors"
)

const quantizeSynopsis = "--model bert|llama|resnet50 --weights DIR|W.safetensors|synthetic[:SEED] [--config config.json] [--calib IN.safetensors|synthetic] [--batches 50] [--batch 1] [--seq 128] [--method percentile] [--percentile 99.99] [--bins 2048] [--scheme w8a8|w8a16|w4a16|nf4|fp8] [--group 128] [--dtype auto] [--device cpu|cuda] --out DIR"

const quantizeDoc = `
Quantize converts a model to int8 (or int4) by post-training quantization
and writes the quantized checkpoint with a per-layer report of what it
cost.

--model bert takes --scheme w8a8: every linear layer of BERT's encoder in
int8, weights symmetric per output channel, inputs symmetric per tensor
with a static scale that calibration fixes. The embeddings, layer norms,
attention core and pooler stay in floating point. Calibration runs
--batches batches of --batch sequences through the float model and
observes each linear layer's input with --method: absmax (the largest
|x|), percentile (the --percentile of |x|, exactly as torch.quantile),
percentile-hist (the same from a --bins histogram, within one bin),
entropy (TensorRT's KL-divergence calibration) or mse (the clipping with
the least squared error). --calib (required) synthetic draws random token
ids of --seq tokens (seeded); a file holds input_ids [n, seq] (and
optionally attention_mask and token_type_ids) as for 'zbench infer', taken
--batch rows at a time.

--model llama quantizes the linear modules of every decoder layer, with
no calibration: --scheme w8a8 (int8 weights per output channel, inputs
quantized per token as the model runs), w8a16 (weight-only int8 per
output channel), w4a16 (weight-only int4 in groups of --group values),
nf4 (bitsandbytes' 4-bit NormalFloat in blocks of --group values) or fp8
(E4M3 weights per output channel, inputs cast to E4M3 per token as the
model runs: llm-compressor's FP8_DYNAMIC).
The embeddings, norms and lm_head stay in floating point (--dtype: auto is
the config's torch_dtype). --calib (default synthetic: --seq seeded ids)
gives only the evaluation batch (input_ids, and attention_mask, as for
'zbench infer'). The checkpoint's tokenizer and generation files are
copied beside the quantized one, which 'zbench generate' and 'zbench
infer' load.

--model resnet50 (or any torchvision ResNet: resnet18 … wide_resnet101_2)
takes --scheme w8a8 as BERT does: every convolution and the fc in int8,
BatchNorm folded into the convolutions first, inputs with static scales
per tensor from calibration over --batches batches of --batch images:
seeded N(0, 1) images of --seq × --seq pixels with --calib synthetic, or a
file's pixel_values [N, 3, H, W] as for 'zbench infer'. The checkpoint
keeps torchvision's names, the folded biases in place of the BatchNorms
(X.weight I8 [Co, Ci/G, Kh, Kw], X.weight_scale, X.input_scale, X.bias),
and 'zbench infer --model resnet50' runs it.

--weights synthetic (or synthetic:SEED) is the seeded synthetic weights of
the config (BERT-base, or TinyLlama-1.1B, without --config; the named
ResNet), which the benchmarks use.

DIR receives model.safetensors and config.json in the compressed-tensors
layout that vLLM and llm-compressor read: for w8a8 each quantized Linear X
as X.weight I8, X.weight_scale F32 [out, 1] and, for static inputs,
X.input_scale F32 [1] ("int-quantized"); for w8a16 and w4a16 X.weight_packed
I32 (codes packed from the low bits up), X.weight_scale and X.weight_shape
("pack-quantized"); for fp8 X.weight F8_E4M3 and X.weight_scale
("float-quantized"); for nf4 bitsandbytes' layout, which Hugging Face
transformers reads (X.weight U8, X.weight.absmax, X.weight.quant_map,
X.weight.quant_state.bitsandbytes__nf4); and config.json's
quantization_config. Beside them, quantization-report.txt and .json: per
layer the weight's (and for static w8a8 the input's) mean squared error
and SQNR after quantize-dequantize,
the input's clipping point and the bytes against float32 and float16; for
the model, the relative error of its outputs (BERT's last_hidden_state and
pooler_output, Llama's logits) against the float model on one evaluation
batch (the calibration's first, or a separate synthetic batch).`

// quantizeReport is quantization-report.json.
type quantizeReport struct {
	Model       string               `json:"model"`
	Scheme      string               `json:"scheme"`
	Group       int                  `json:"group,omitempty"`
	Method      string               `json:"method,omitempty"`
	Percentile  float64              `json:"percentile,omitempty"`
	Batches     int                  `json:"batches"`
	Batch       int                  `json:"batch"`
	Seq         int                  `json:"seq"`
	Width       int                  `json:"width,omitempty"`
	Device      string               `json:"device"`
	DType       string               `json:"dtype"`
	Weights     string               `json:"weights"`
	Layers      []quant.LinearReport `json:"layers"`
	QuantBytes  int64                `json:"quantized_bytes"`
	F32Bytes    int64                `json:"f32_bytes"`
	F16Bytes    int64                `json:"f16_bytes"`
	Outputs     []outputError        `json:"outputs"`
	Time        string               `json:"quantize_time"`
	Calibration string               `json:"calibration"`
}

// outputError is a model output's error against the float model.
type outputError struct {
	Name   string  `json:"name"`
	RelErr float64 `json:"rel_err"`
}

// quantizeJob is a parsed quantize command line.
type quantizeJob struct {
	weights, config, calib, method, dtype, out string
	opt                                        quant.Options
	batches, batch, seq, group                 int
	scheme                                     quant.Scheme
	dev                                        kernels.Backend
}

// quantizeModels are the models --model takes: bert, llama and the
// torchvision ResNets.
var quantizeModels = append([]string{"bert", "llama"}, resnet.Names()...)

func runQuantize(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("quantize", quantizeSynopsis, quantizeDoc, stderr)
	var (
		model      = fs.String("model", "", "the model: "+strings.Join(quantizeModels, " or ")+" (required)")
		weights    = fs.String("weights", "", "the checkpoint `path` (a Hugging Face directory or safetensors file), or synthetic[:SEED] (required)")
		config     = fs.String("config", "", "the model's Hugging Face config.json `file` (default: the checkpoint's; BERT-base or TinyLlama for synthetic weights)")
		calib      = fs.String("calib", "", "the calibration (bert, required) or evaluation (llama, default synthetic) inputs: a safetensors `file` with input_ids, or synthetic")
		batches    = fs.Int("batches", quant.DefaultBatches, "calibration batches")
		batch      = fs.Int("batch", 1, "sequences per calibration batch")
		seq        = fs.Int("seq", 0, "tokens per synthetic sequence (default 128), or the side of synthetic images (default 224)")
		method     = fs.String("method", "percentile", "the calibration method (bert): "+strings.Join(quant.Methods(), ", "))
		percentile = fs.Float64("percentile", 0, "the percentile of |x| for the percentile methods (default 99.99)")
		bins       = fs.Int("bins", 0, "histogram bins of percentile-hist, entropy and mse (default 2048)")
		scheme     = fs.String("scheme", string(quant.W8A8), "the quantization scheme: "+strings.Join(quant.Schemes(), ", ")+" (bert: w8a8)")
		group      = fs.Int("group", 0, "values per scale along the input for w4a16 (default 128) and nf4 (default 64)")
		dtype      = fs.String("dtype", "auto", "llama's precision of what stays in floating point: auto (the config's torch_dtype), f32, f16 or bf16")
		device     = fs.String("device", "cpu", "the device: "+strings.Join(knownDevices, " or "))
		out        = fs.String("out", "", "the `directory` to write the quantized checkpoint and report to (required)")
	)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	var missing []string
	for _, f := range []struct{ name, val string }{{"model", *model}, {"weights", *weights}, {"out", *out}} {
		if f.val == "" {
			missing = append(missing, "--"+f.name)
		}
	}
	switch {
	case len(missing) > 0:
		return usageErrorf("missing required flag %s (see 'zbench quantize -h')", strings.Join(missing, ", "))
	case !slices.Contains(quantizeModels, *model):
		return usageErrorf("unknown --model %q (want %s)", *model, strings.Join(quantizeModels, " or "))
	case *model != "llama" && *calib == "":
		return usageErrorf("--model %s needs --calib (a file or synthetic) to calibrate its input scales", *model)
	case *batches < 1 || *batch < 1 || *seq < 0:
		return usageErrorf("--batches %d, --batch %d, --seq %d: want each at least 1", *batches, *batch, *seq)
	case !slices.Contains(llamaDTypes, *dtype):
		return usageErrorf("unknown --dtype %q (want %s)", *dtype, strings.Join(llamaDTypes, ", "))
	}
	sch, err := quant.ParseScheme(*scheme)
	if err != nil {
		return usageErrorf("--scheme: %v", err)
	}
	// A flag the model or scheme has no use for is a mistake, not ignored.
	unused := map[string]bool{"group": sch != quant.W4A16 && sch != quant.NF4}
	switch *model {
	case "bert":
		unused["dtype"] = true
	case "llama":
		for _, f := range []string{"method", "percentile", "bins", "batches", "batch"} {
			unused[f] = true
		}
	default:
		unused["dtype"], unused["config"] = true, true
	}
	var set []string
	fs.Visit(func(f *flag.Flag) {
		if unused[f.Name] {
			set = append(set, "--"+f.Name)
		}
	})
	if len(set) > 0 {
		return usageErrorf("%s: not used by --model %s --scheme %s", strings.Join(set, ", "), *model, sch)
	}
	if *model != "llama" && sch != quant.W8A8 { // BERT's and ResNets' FP8 have no checkpoint layout
		return usageErrorf("--scheme %s: %s is quantized in w8a8 with static input scales", sch, *model)
	}
	if *group == 0 {
		*group = map[quant.Scheme]int{quant.W4A16: 128, quant.NF4: 64}[sch]
	}
	if *group < 0 || *group%32 != 0 {
		return usageErrorf("--group %d: want a positive multiple of 32", *group)
	}
	opt := quant.Options{Percentile: *percentile, Bins: *bins}
	if _, err := quant.New(*method, opt); err != nil {
		return usageErrorf("--method %s: %v", *method, err)
	}
	if *calib == "" {
		*calib = "synthetic"
	}
	if *seq == 0 {
		*seq = 128
		if *model != "bert" && *model != "llama" {
			*seq = 224
		}
	}
	dev, err := openDevice(*device)
	if err != nil {
		return err
	}
	job := quantizeJob{weights: *weights, config: *config, calib: *calib, method: *method, dtype: *dtype, out: *out,
		opt: opt, batches: *batches, batch: *batch, seq: *seq, group: *group, scheme: sch, dev: dev}
	var rep quantizeReport
	switch *model {
	case "bert":
		rep, err = quantizeBERT(job)
	case "llama":
		rep, err = quantizeLlama(job)
	default:
		rep, err = quantizeResNet(job, *model)
	}
	if err != nil {
		return err
	}
	return printQuantizeReport(stdout, rep, *out)
}

// quantizeBERT calibrates and quantizes a BERT model and writes it.
func quantizeBERT(j quantizeJob) (rep quantizeReport, err error) {
	cfg, src, cfgPath, err := quantizeSource(j.weights, j.config)
	if err != nil {
		return rep, err
	}
	cal, eval, err := calibrationBatches(cfg, j.calib, j.batches, j.batch, j.seq)
	if err != nil {
		return rep, err
	}
	cal.NewObserver = j.newObserver
	if err := os.MkdirAll(j.out, 0o755); err != nil {
		return rep, fmt.Errorf("--out: %w", err)
	}
	m, err := bert.Load(j.dev, cfg, src, nn.F32)
	if err != nil {
		return rep, fmt.Errorf("loading weights: %w", err)
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	refH, refP, err := bertOutputs(m, eval)
	if err != nil {
		return rep, err
	}
	start := time.Now()
	layers, err := m.Quantize(cal)
	if err != nil {
		return rep, err
	}
	elapsed := time.Since(start)
	gotH, gotP, err := bertOutputs(m, eval)
	if err != nil {
		return rep, err
	}
	rep = newQuantizeReport(j, "bert", layers, elapsed, "f32")
	rep.Method, rep.Batches, rep.Batch, rep.Seq, rep.Percentile = j.method, len(cal.Batches), cal.Batch, cal.Seq, j.percentile()
	for _, o := range []struct {
		name     string
		ref, got []float32
	}{{"last_hidden_state", refH, gotH}, {"pooler_output", refP, gotP}} {
		rel, err := quant.RelL2(o.ref, o.got)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", o.name, err)
		}
		rep.Outputs = append(rep.Outputs, outputError{o.name, rel})
	}
	tensors, err := m.QuantizedTensors()
	if err != nil {
		return rep, err
	}
	raw := map[string]json.RawMessage{}
	if cfgPath == "" {
		data, err := json.Marshal(m.Config)
		if err != nil {
			return rep, err
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			return rep, err
		}
		raw["model_type"], raw["architectures"] = json.RawMessage(`"bert"`), json.RawMessage(`["BertModel"]`)
	} else if raw, err = readConfigJSON(cfgPath); err != nil {
		return rep, err
	}
	qc, err := json.Marshal(quant.NewConfig(quant.Spec{Scheme: quant.W8A8, Method: j.method, Ignore: bert.QuantIgnored()}))
	if err != nil {
		return rep, err
	}
	raw["quantization_config"] = qc
	return rep, writeQuantized(j.out, tensors, raw, rep)
}

// newObserver returns a fresh observer of j's calibration method (which
// runQuantize has checked).
func (j quantizeJob) newObserver() quant.Observer {
	o, _ := quant.New(j.method, j.opt)
	return o
}

// percentile is the report's percentile: j's, or the default, for the
// percentile methods; 0 for the others.
func (j quantizeJob) percentile() float64 {
	if !strings.HasPrefix(j.method, "percentile") {
		return 0
	}
	return cmp.Or(j.opt.Percentile, quant.DefaultPercentile)
}

// logitsError is a model's logits' error against the float model's.
func logitsError(ref, got []float32) ([]outputError, error) {
	rel, err := quant.RelL2(ref, got)
	if err != nil {
		return nil, fmt.Errorf("logits: %w", err)
	}
	return []outputError{{"logits", rel}}, nil
}

// newQuantizeReport starts the report of a model quantized by j.
func newQuantizeReport(j quantizeJob, model string, layers []quant.LinearReport, elapsed time.Duration, dtype string) quantizeReport {
	rep := quantizeReport{Model: model, Scheme: string(j.scheme), Device: j.dev.Name() + " (" + j.dev.Info().Name + ")", DType: dtype,
		Weights: j.weights, Layers: layers, Time: round(elapsed).String(), Calibration: j.calib}
	for _, l := range layers {
		rep.QuantBytes += l.Bytes
		rep.F32Bytes += l.F32Bytes
		rep.F16Bytes += l.F16Bytes
	}
	return rep
}

// readConfigJSON reads a config.json as a map of its keys.
func readConfigJSON(path string) (map[string]json.RawMessage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	raw := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return raw, nil
}

// quantizeSource resolves --weights and --config: the config, the
// weights and the config.json file to extend ("" for synthetic weights
// without --config).
func quantizeSource(weights, config string) (bert.Config, nn.Source, string, error) {
	if rest, ok := strings.CutPrefix(weights, "synthetic"); ok && (rest == "" || rest[0] == ':') {
		seed := uint64(20261121) // the benchmarks' seed
		if rest != "" {
			s, err := strconv.ParseUint(rest[1:], 10, 64)
			if err != nil {
				return bert.Config{}, nil, "", usageErrorf("--weights %s: the seed must be an unsigned integer", weights)
			}
			seed = s
		}
		cfg := bert.Base()
		if config != "" {
			c, err := bert.LoadConfig(config)
			if err != nil {
				return bert.Config{}, nil, "", err
			}
			cfg = c
		}
		return cfg, bert.Synthetic(seed), config, nil
	}
	files, err := checkpoint.Resolve(weights, config)
	if err != nil {
		return bert.Config{}, nil, "", err
	}
	if files.Sharded() {
		return bert.Config{}, nil, "", fmt.Errorf("weights: %s lists %d shards; the bert loader reads one file", files.Index, len(files.Weights))
	}
	cfg, err := bert.LoadConfig(files.Config)
	if err != nil {
		return bert.Config{}, nil, "", err
	}
	if cfg.Quant != "" {
		return bert.Config{}, nil, "", fmt.Errorf("config %s: the checkpoint is already quantized (%s)", files.Config, cfg.Quant)
	}
	ck, err := bert.OpenCheckpoint(files.Weights[0])
	if err != nil {
		return bert.Config{}, nil, "", fmt.Errorf("weights: %w", err)
	}
	return cfg, ck, files.Config, nil
}

// calibrationBatches returns the calibration and the evaluation batch:
// synthetic ids (seeded, the evaluation batch apart from the calibration),
// or the rows of a file, batch at a time, the first batch also the
// evaluation batch.
func calibrationBatches(cfg bert.Config, calib string, batches, batch, seq int) (bert.Calibration, bertBatch, error) {
	cal := bert.Calibration{Batch: batch, Seq: seq}
	if calib == "synthetic" {
		if seq > cfg.MaxPositionEmbeddings {
			return cal, bertBatch{}, usageErrorf("--seq %d exceeds the model's max_position_embeddings %d", seq, cfg.MaxPositionEmbeddings)
		}
		for i := range batches {
			cal.Batches = append(cal.Batches, bert.Inputs{IDs: syntheticIDs(uint64(i+1), batch*seq, cfg.VocabSize)})
		}
		return cal, bertBatch{bert.Inputs{IDs: syntheticIDs(0, batch*seq, cfg.VocabSize)}, batch, seq}, nil
	}
	f, err := safetensors.Open(calib)
	if err != nil {
		return cal, bertBatch{}, fmt.Errorf("--calib: %w", err)
	}
	rows, s, in, err := readBERTInputs(f)
	if err != nil {
		return cal, bertBatch{}, fmt.Errorf("--calib: %w", err)
	}
	if rows < batch {
		return cal, bertBatch{}, fmt.Errorf("--calib %s: %d rows, fewer than --batch %d", calib, rows, batch)
	}
	cal.Seq = s
	rowsOf := func(v []int32, r int) []int32 {
		if v == nil {
			return nil
		}
		return v[r*s : (r+batch)*s]
	}
	for r := 0; r+batch <= rows && len(cal.Batches) < batches; r += batch {
		cal.Batches = append(cal.Batches, bert.Inputs{IDs: rowsOf(in.IDs, r), Mask: rowsOf(in.Mask, r), TypeIDs: rowsOf(in.TypeIDs, r)})
	}
	return cal, bertBatch{cal.Batches[0], batch, s}, nil
}

// syntheticIDs returns n token ids below vocab from a seeded generator.
func syntheticIDs(seed uint64, n, vocab int) []int32 {
	ids := make([]int32, n)
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range ids {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		ids[i] = int32(x % uint64(vocab))
	}
	return ids
}

// bertBatch is one batch of BERT inputs with its shape.
type bertBatch struct {
	in         bert.Inputs
	batch, seq int
}

// bertOutputs runs m on b: last_hidden_state and pooler_output.
func bertOutputs(m *bert.Model, b bertBatch) (hidden, pooled []float32, err error) {
	f, err := m.NewForward(b.batch, b.seq)
	if err != nil {
		return nil, nil, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if err := f.SetInputs(b.in); err != nil {
		return nil, nil, err
	}
	if err := f.Run(); err != nil {
		return nil, nil, err
	}
	if hidden, err = f.LastHidden(); err != nil {
		return nil, nil, err
	}
	pooled, err = f.Pooled()
	return hidden, pooled, err
}

// writeQuantized writes the checkpoint's tensors, its config.json (raw's
// keys) and both reports into dir, each file atomically.
func writeQuantized(dir string, tensors []safetensors.Tensor, raw map[string]json.RawMessage, rep quantizeReport) error {
	ckpt, err := createAtomic(filepath.Join(dir, checkpoint.WeightsName))
	if err != nil {
		return err
	}
	defer ckpt.abort()
	cfgJSON, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return err
	}
	repJSON, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	var txt strings.Builder
	if err := printQuantizeReport(&txt, rep, dir); err != nil {
		return err
	}
	layout := map[quant.Scheme]string{quant.W8A8: "compressed-tensors int-quantized", quant.W8A16: "compressed-tensors pack-quantized",
		quant.W4A16: "compressed-tensors pack-quantized", quant.FP8: "compressed-tensors float-quantized", quant.NF4: "bitsandbytes"}[quant.Scheme(rep.Scheme)]
	if err := ckpt.commit(tensors, map[string]string{"format": "pt", "quantization": layout + " " + rep.Scheme}); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{checkpoint.ConfigName, append(cfgJSON, '\n')}, {"quantization-report.json", append(repJSON, '\n')}, {"quantization-report.txt", []byte(txt.String())}} {
		a, err := createAtomic(filepath.Join(dir, f.name))
		if err != nil {
			return err
		}
		if err := a.commitBytes(f.data); err != nil {
			return err
		}
	}
	return nil
}

// printQuantizeReport writes the per-layer table and the totals.
func printQuantizeReport(w io.Writer, rep quantizeReport, dir string) error {
	how := "weights only"
	if rep.Method != "" {
		shape := fmt.Sprintf("%d×%d", rep.Batch, rep.Seq)
		if rep.Width > 0 {
			shape = fmt.Sprintf("%d×3×%d×%d", rep.Batch, rep.Seq, rep.Width)
		}
		how = fmt.Sprintf("calibrated by %s over %d batches of %s (%s)", rep.Method, rep.Batches, shape, rep.Calibration)
	} else if rep.Scheme == string(quant.W8A8) {
		how = "inputs quantized per token as the model runs"
	}
	if rep.Group > 0 {
		how = fmt.Sprintf("groups of %d, %s", rep.Group, how)
	}
	fmt.Fprintf(w, "model      %s, %s, %s, in %s on %s, the rest in %s\n", rep.Model, rep.Scheme, how, rep.Time, rep.Device, rep.DType)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if rep.Method != "" {
		fmt.Fprintln(tw, "layer\tweight MSE\tweight SQNR dB\tinput amax\tinput MSE\tinput SQNR dB\tbytes\tf32 bytes\t")
	} else {
		fmt.Fprintln(tw, "layer\tweight MSE\tweight SQNR dB\tbytes\tf32 bytes\t")
	}
	for _, l := range rep.Layers {
		name := strings.TrimPrefix(strings.TrimPrefix(l.Name, "encoder."), "model.")
		if rep.Method != "" {
			fmt.Fprintf(tw, "%s\t%.3g\t%.1f\t%.4g\t%.3g\t%.1f\t%d\t%d\t\n",
				name, l.WeightMSE, l.WeightSQNR, l.InputAmax, l.InputMSE, l.InputSQNR, l.Bytes, l.F32Bytes)
		} else {
			fmt.Fprintf(tw, "%s\t%.3g\t%.1f\t%d\t%d\t\n", name, l.WeightMSE, l.WeightSQNR, l.Bytes, l.F32Bytes)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "weights    %d layers: %s quantized with scales, against %s in float32 (%.2f× smaller) and %s in float16 (%.2f×)\n",
		len(rep.Layers), mib(rep.QuantBytes), mib(rep.F32Bytes), float64(rep.F32Bytes)/float64(rep.QuantBytes),
		mib(rep.F16Bytes), float64(rep.F16Bytes)/float64(rep.QuantBytes))
	var errs []string
	for _, o := range rep.Outputs {
		errs = append(errs, fmt.Sprintf("%s rel-err %.3g", o.Name, o.RelErr))
	}
	fmt.Fprintf(w, "accuracy   against the float model: %s\n", strings.Join(errs, ", "))
	fmt.Fprintf(w, "written    %s: %s, %s, quantization-report.txt, quantization-report.json\n", dir, checkpoint.WeightsName, checkpoint.ConfigName)
	return nil
}

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
