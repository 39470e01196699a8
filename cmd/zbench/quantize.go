package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/checkpoint"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

const quantizeSynopsis = "--model bert --weights DIR|W.safetensors|synthetic[:SEED] [--config config.json] --calib IN.safetensors|synthetic [--batches 50] [--batch 1] [--seq 128] [--method percentile] [--percentile 99.99] [--bins 2048] [--scheme w8a8] [--device cpu|cuda] --out DIR"

const quantizeDoc = `
Quantize converts a model to int8 by post-training quantization and writes
the quantized checkpoint with a per-layer report of what it cost.

--scheme w8a8 (the one scheme so far) keeps every linear layer of BERT's
encoder in int8: weights symmetric per output channel, inputs symmetric per
tensor with a static scale that calibration fixes. The embeddings, layer
norms, attention core and pooler stay in floating point.

Calibration runs --batches batches of --batch sequences through the float
model and observes each linear layer's input with --method: absmax (the
largest |x|), percentile (the --percentile of |x|, exactly as torch.quantile),
percentile-hist (the same from a --bins histogram, within one bin), entropy
(TensorRT's KL-divergence calibration) or mse (the clipping with the least
squared error). --calib synthetic draws random token ids of --seq tokens
(seeded); a file holds input_ids [n, seq] (and optionally attention_mask
and token_type_ids) as for 'zbench infer', taken --batch rows at a time.

--weights synthetic (or synthetic:SEED) is the seeded synthetic weights of
the config (BERT-base without --config), which the benchmarks use.

DIR receives model.safetensors and config.json in the compressed-tensors
layout that vLLM and llm-compressor read (each quantized Linear X as
X.weight I8, X.weight_scale F32 [out, 1], X.input_scale F32 [1] and X.bias,
and config.json's quantization_config), which 'zbench infer' loads, and
quantization-report.txt and .json: per layer the weight's and the input's
mean squared error and SQNR after quantize-dequantize, the input's clipping
point and the bytes against float32 and float16; for the model, the
relative error of last_hidden_state and pooler_output against the float
model on one evaluation batch (the calibration's first, or a separate
synthetic batch).`

// quantizeReport is quantization-report.json.
type quantizeReport struct {
	Model       string               `json:"model"`
	Scheme      string               `json:"scheme"`
	Method      string               `json:"method"`
	Percentile  float64              `json:"percentile,omitempty"`
	Batches     int                  `json:"batches"`
	Batch       int                  `json:"batch"`
	Seq         int                  `json:"seq"`
	Device      string               `json:"device"`
	Weights     string               `json:"weights"`
	Layers      []quant.LinearReport `json:"layers"`
	Int8Bytes   int64                `json:"int8_bytes"`
	F32Bytes    int64                `json:"f32_bytes"`
	F16Bytes    int64                `json:"f16_bytes"`
	HiddenErr   float64              `json:"last_hidden_state_rel_err"`
	PooledErr   float64              `json:"pooler_output_rel_err"`
	CalibTime   string               `json:"calibration_time"`
	Calibration string               `json:"calibration"`
}

func runQuantize(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("quantize", quantizeSynopsis, quantizeDoc, stderr)
	var (
		model      = fs.String("model", "", "the model: bert (required)")
		weights    = fs.String("weights", "", "the checkpoint `path` (a Hugging Face directory or safetensors file), or synthetic[:SEED] (required)")
		config     = fs.String("config", "", "the model's Hugging Face config.json `file` (default: the checkpoint's; BERT-base for synthetic weights)")
		calib      = fs.String("calib", "", "the calibration inputs: a safetensors `file` with input_ids, or synthetic (required)")
		batches    = fs.Int("batches", quant.DefaultBatches, "calibration batches")
		batch      = fs.Int("batch", 1, "sequences per calibration batch")
		seq        = fs.Int("seq", 128, "tokens per synthetic calibration sequence")
		method     = fs.String("method", "percentile", "the calibration method: "+strings.Join(quant.Methods(), ", "))
		percentile = fs.Float64("percentile", 0, "the percentile of |x| for the percentile methods (default 99.99)")
		bins       = fs.Int("bins", 0, "histogram bins of percentile-hist, entropy and mse (default 2048)")
		scheme     = fs.String("scheme", string(quant.W8A8), "the quantization scheme: "+strings.Join(quant.Schemes(), ", "))
		device     = fs.String("device", "cpu", "the device: "+strings.Join(knownDevices, " or "))
		out        = fs.String("out", "", "the `directory` to write the quantized checkpoint and report to (required)")
	)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	var missing []string
	for _, f := range []struct{ name, val string }{{"model", *model}, {"weights", *weights}, {"calib", *calib}, {"out", *out}} {
		if f.val == "" {
			missing = append(missing, "--"+f.name)
		}
	}
	switch {
	case len(missing) > 0:
		return usageErrorf("missing required flag %s (see 'zbench quantize -h')", strings.Join(missing, ", "))
	case *model != "bert":
		return usageErrorf("unknown --model %q (want bert)", *model)
	case *batches < 1 || *batch < 1 || *seq < 1:
		return usageErrorf("--batches %d, --batch %d, --seq %d: want each at least 1", *batches, *batch, *seq)
	}
	sch, err := quant.ParseScheme(*scheme)
	if err != nil {
		return usageErrorf("--scheme: %v", err)
	}
	opt := quant.Options{Percentile: *percentile, Bins: *bins}
	if _, err := quant.New(*method, opt); err != nil {
		return usageErrorf("--method %s: %v", *method, err)
	}

	cfg, src, cfgPath, err := quantizeSource(*weights, *config)
	if err != nil {
		return err
	}
	cal, eval, err := calibrationBatches(cfg, *calib, *batches, *batch, *seq)
	if err != nil {
		return err
	}
	cal.NewObserver = func() quant.Observer {
		o, _ := quant.New(*method, opt) // checked above
		return o
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	dev, err := openDevice(*device)
	if err != nil {
		return err
	}
	m, err := bert.Load(dev, cfg, src, nn.F32)
	if err != nil {
		return fmt.Errorf("loading weights: %w", err)
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	refH, refP, err := bertOutputs(m, eval)
	if err != nil {
		return err
	}
	start := time.Now()
	layers, err := m.Quantize(cal)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	gotH, gotP, err := bertOutputs(m, eval)
	if err != nil {
		return err
	}
	rep := quantizeReport{Model: *model, Scheme: string(sch), Method: *method, Batches: len(cal.Batches), Batch: cal.Batch, Seq: cal.Seq,
		Device: dev.Name() + " (" + dev.Info().Name + ")", Weights: *weights, Layers: layers, CalibTime: round(elapsed).String(), Calibration: *calib}
	if strings.HasPrefix(*method, "percentile") {
		rep.Percentile = quant.DefaultPercentile
		if *percentile != 0 {
			rep.Percentile = *percentile
		}
	}
	for _, l := range layers {
		rep.Int8Bytes += l.Bytes
		rep.F32Bytes += l.F32Bytes
		rep.F16Bytes += l.F16Bytes
	}
	if rep.HiddenErr, err = quant.RelL2(refH, gotH); err != nil {
		return fmt.Errorf("last_hidden_state: %w", err)
	}
	if rep.PooledErr, err = quant.RelL2(refP, gotP); err != nil {
		return fmt.Errorf("pooler_output: %w", err)
	}
	if err := writeQuantized(*out, m, cfgPath, rep); err != nil {
		return err
	}
	return printQuantizeReport(stdout, rep, *out)
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

// writeQuantized writes the checkpoint, config.json (cfgPath's with a
// quantization_config, or the model's config) and both reports into dir,
// each file atomically.
func writeQuantized(dir string, m *bert.Model, cfgPath string, rep quantizeReport) error {
	tensors, err := m.QuantizedTensors()
	if err != nil {
		return err
	}
	ckpt, err := createAtomic(filepath.Join(dir, checkpoint.WeightsName))
	if err != nil {
		return err
	}
	defer ckpt.abort()
	raw := map[string]json.RawMessage{}
	if cfgPath != "" {
		data, err := os.ReadFile(cfgPath)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			return fmt.Errorf("config %s: %w", cfgPath, err)
		}
	} else {
		data, err := json.Marshal(m.Config)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			return err
		}
		raw["model_type"], raw["architectures"] = json.RawMessage(`"bert"`), json.RawMessage(`["BertModel"]`)
	}
	qc, err := json.Marshal(quant.NewConfig(quant.Spec{Scheme: quant.Scheme(rep.Scheme), Method: rep.Method, Ignore: bert.QuantIgnored()}))
	if err != nil {
		return err
	}
	raw["quantization_config"] = qc
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
	if err := ckpt.commit(tensors, map[string]string{"format": "pt", "quantization": "compressed-tensors int-quantized " + rep.Scheme}); err != nil {
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
	fmt.Fprintf(w, "model      %s, %s, calibrated by %s over %d batches of %d×%d (%s) in %s on %s\n",
		rep.Model, rep.Scheme, rep.Method, rep.Batches, rep.Batch, rep.Seq, rep.Calibration, rep.CalibTime, rep.Device)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layer\tweight MSE\tweight SQNR dB\tinput amax\tinput MSE\tinput SQNR dB\tint8 bytes\tf32 bytes\t")
	for _, l := range rep.Layers {
		fmt.Fprintf(tw, "%s\t%.3g\t%.1f\t%.4g\t%.3g\t%.1f\t%d\t%d\t\n",
			strings.TrimPrefix(l.Name, "encoder."), l.WeightMSE, l.WeightSQNR, l.InputAmax, l.InputMSE, l.InputSQNR, l.Bytes, l.F32Bytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "weights    %d linear layers: %s int8 with scales, against %s in float32 (%.2f× smaller) and %s in float16 (%.2f×)\n",
		len(rep.Layers), mib(rep.Int8Bytes), mib(rep.F32Bytes), float64(rep.F32Bytes)/float64(rep.Int8Bytes),
		mib(rep.F16Bytes), float64(rep.F16Bytes)/float64(rep.Int8Bytes))
	fmt.Fprintf(w, "accuracy   against the float model: last_hidden_state rel-err %.3g, pooler_output rel-err %.3g\n", rep.HiddenErr, rep.PooledErr)
	fmt.Fprintf(w, "written    %s: %s, %s, quantization-report.txt, quantization-report.json\n", dir, checkpoint.WeightsName, checkpoint.ConfigName)
	return nil
}

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
