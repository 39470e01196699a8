package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/checkpoint"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

const quantizeSynopsis = "--model bert|llama|resnet50 --weights DIR|W.safetensors|synthetic[:SEED] [--config config.json] [--calib IN.safetensors|synthetic] [--batches 50] [--batch 1] [--seq 128] [--size 224] [--method percentile] [--percentile 99.99] [--bins 2048] [--scheme w8a8|w8a16|w4a16|nf4|fp8] [--group 128] [--dtype auto] [--device cpu|cuda] [--format safetensors|gguf [--type Q8_0|Q4_0] [--tokenizer FILE]] --out DIR|FILE.gguf"

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
seeded N(0, 1) images of --size × --size pixels with --calib synthetic, or a
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
batch (the calibration's first, or a separate synthetic batch).

--format gguf (llama) writes one GGUF file that llama.cpp and 'zbench
generate' load instead: --type Q8_0 or Q4_0 (ggml's reference quantizers;
rows that are not whole blocks of 32 fall back to F16, as llama.cpp's
converter does), or F16, BF16 or F32, for every 2-D tensor (embeddings and
output too), the norms in F32, q and k rows in llama.cpp's order, the
config as llama.* metadata and the tokenizer embedded (--tokenizer, else
the checkpoint's or the GGUF file's own). --weights may itself be a .gguf
file. No calibration, evaluation or report: --scheme, --calib and the
other quantization flags are refused.`

// quantizeReport is quantization-report.json.
type quantizeReport struct {
	Model       string               `json:"model"`
	Scheme      string               `json:"scheme"`
	Group       int                  `json:"group,omitempty"`
	Method      string               `json:"method,omitempty"`
	Percentile  float64              `json:"percentile,omitempty"`
	Batches     int                  `json:"batches"`
	Batch       int                  `json:"batch"`
	Seq         int                  `json:"seq,omitempty"`
	Height      int                  `json:"height,omitempty"`
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
	model, weights, config, calib, method, dtype, out string
	opt                                               quant.Options
	batches, batch, seq, size, group                  int
	scheme                                            quant.Scheme
	dev                                               kernels.Backend
}

func runQuantize(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("quantize", quantizeSynopsis, quantizeDoc, stderr)
	var (
		model      = fs.String("model", "", "the model: "+strings.Join(modelNames(canQuantize), ", ")+" (required)")
		weights    = fs.String("weights", "", "the checkpoint `path` (a Hugging Face directory or safetensors file), or synthetic[:SEED] (required)")
		config     = fs.String("config", "", "the model's Hugging Face config.json `file` (default: the checkpoint's; BERT-base or TinyLlama for synthetic weights)")
		calib      = fs.String("calib", "", "the calibration (bert, required) or evaluation (llama, default synthetic) inputs: a safetensors `file` with input_ids, or synthetic")
		batches    = fs.Int("batches", quant.DefaultBatches, "calibration batches")
		batch      = fs.Int("batch", 1, "sequences per calibration batch")
		seq        = fs.Int("seq", 0, "tokens per synthetic sequence (bert, llama; default 128)")
		size       = fs.Int("size", 0, "the side of synthetic calibration images in pixels (ResNets; default 224)")
		method     = fs.String("method", "percentile", "the calibration method (bert): "+strings.Join(quant.Methods(), ", "))
		percentile = fs.Float64("percentile", 0, "the percentile of |x| for the percentile methods (default 99.99)")
		bins       = fs.Int("bins", 0, "histogram bins of percentile-hist, entropy and mse (default 2048)")
		scheme     = fs.String("scheme", string(quant.W8A8), "the quantization scheme: "+strings.Join(quant.Schemes(), ", ")+" (bert: w8a8)")
		group      = fs.Int("group", 0, "values per scale along the input for w4a16 (default 128) and nf4 (default 64)")
		dtype      = fs.String("dtype", "auto", "llama's precision of what stays in floating point: auto (the config's torch_dtype), f32, f16 or bf16")
		device     = fs.String("device", "cpu", "the device: "+strings.Join(knownDevices, " or "))
		out        = fs.String("out", "", "the `directory` to write the quantized checkpoint and report to (required); with --format gguf, the .gguf `file`")
		format     = fs.String("format", "safetensors", "the output: safetensors (a quantized checkpoint directory) or gguf (llama: one GGUF file)")
		ggufType   = fs.String("type", "Q8_0", "with --format gguf, the 2-D tensors' type: Q8_0, Q4_0, F16, BF16 or F32")
		tokPath    = fs.String("tokenizer", "", "with --format gguf, the tokenizer to embed (default: the checkpoint's, or the GGUF file's)")
		ggufName   = fs.String("name", "", "with --format gguf, general.name (default: the weights' file or directory name)")
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
	if len(missing) > 0 {
		return usageErrorf("missing required flag %s (see 'zbench quantize -h')", strings.Join(missing, ", "))
	}
	m, err := modelFor(canQuantize, *model)
	if err != nil {
		return err
	}
	switch *format {
	case "gguf":
		if !m.generates {
			return usageErrorf("--format gguf: only Llama-family models (%s) are written as GGUF", strings.Join(modelNames(canGenerate), ", "))
		}
		return quantizeGGUF(fs, stdout, *weights, *config, *ggufType, *tokPath, *ggufName, *out)
	case "safetensors":
		var set []string
		fs.Visit(func(f *flag.Flag) {
			if slices.Contains([]string{"type", "tokenizer", "name"}, f.Name) {
				set = append(set, "--"+f.Name)
			}
		})
		if len(set) > 0 {
			return usageErrorf("%s: only used with --format gguf", strings.Join(set, ", "))
		}
	default:
		return usageErrorf("unknown --format %q (want safetensors or gguf)", *format)
	}
	switch {
	case m.calib && *calib == "":
		return usageErrorf("--model %s needs --calib (a file or synthetic) to calibrate its input scales", *model)
	case *batches < 1 || *batch < 1 || *seq < 0 || *size < 0:
		return usageErrorf("--batches %d, --batch %d, --seq %d, --size %d: want each at least 1", *batches, *batch, *seq, *size)
	case !slices.Contains(llamaDTypes, *dtype):
		return usageErrorf("unknown --dtype %q (want %s)", *dtype, strings.Join(llamaDTypes, ", "))
	}
	sch, err := quant.ParseScheme(*scheme)
	if err != nil {
		return usageErrorf("--scheme: %v", err)
	}
	if !slices.Contains(m.schemes, sch) {
		var want []string
		for _, s := range m.schemes {
			want = append(want, string(s))
		}
		return usageErrorf("--scheme %s: %s is quantized in %s", sch, *model, strings.Join(want, ", "))
	}
	// A flag the model or scheme has no use for is a mistake, not ignored.
	unused := map[string]bool{"group": sch != quant.W4A16 && sch != quant.NF4}
	for _, f := range quantizeModelFlags {
		unused[f] = !slices.Contains(m.quantizeFlags, f)
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
		*seq = m.defaultSize
	}
	if *size == 0 {
		*size = m.defaultSize
	}
	dev, err := openDevice(*device)
	if err != nil {
		return err
	}
	job := quantizeJob{model: *model, weights: *weights, config: *config, calib: *calib, method: *method, dtype: *dtype, out: *out,
		opt: opt, batches: *batches, batch: *batch, seq: *seq, size: *size, group: *group, scheme: sch, dev: dev}
	rep, err := m.quantize(job)
	if err != nil {
		return err
	}
	return printQuantizeReport(stdout, rep, *out)
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

// quantizeMeasured runs m on eval, quantizes it with q, runs it again, and
// returns q's per-layer reports, how long q took, and each output's error
// against the float model's.
func quantizeMeasured(m nn.Runnable, eval map[string]nn.Values, q func() ([]quant.LinearReport, error)) (layers []quant.LinearReport, elapsed time.Duration, errs []outputError, err error) {
	ref, err := runOnce(m, eval)
	if err != nil {
		return nil, 0, nil, err
	}
	start := time.Now()
	if layers, err = q(); err != nil {
		return nil, 0, nil, err
	}
	elapsed = time.Since(start)
	got, err := runOnce(m, eval)
	if err != nil {
		return nil, 0, nil, err
	}
	for i, o := range ref {
		rel, err := quant.RelL2(o.F32, got[i].F32)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("%s: %w", o.Name, err)
		}
		errs = append(errs, outputError{o.Name, rel})
	}
	return layers, elapsed, errs, nil
}

// runOnce runs m once on in and returns its outputs.
func runOnce(m nn.Runnable, in map[string]nn.Values) (out []nn.Named, err error) {
	r, err := m.NewRunner(in)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	if err := r.Set(in); err != nil {
		return nil, err
	}
	if err := r.Run(); err != nil {
		return nil, err
	}
	return r.Outputs()
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
			shape = fmt.Sprintf("%d×3×%d×%d", rep.Batch, rep.Height, rep.Width)
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
