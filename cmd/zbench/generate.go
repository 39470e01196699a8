package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/checkpoint"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/tokenizer"
)

// processStart approximates the process's start for the cold-start
// figure: package variables are set before main runs.
var processStart = time.Now()

// syntheticTinyLlama is the --model name of TinyLlama-1.1B's shape with
// seeded synthetic weights, which needs no checkpoint.
const syntheticTinyLlama = "tinyllama-synthetic"

// tinyLlamaSeed seeds tinyllama-synthetic's weights (the seed of the
// benchmarks and of the golden's tinyllama case).
const tinyLlamaSeed = 20261125

const generateSynopsis = "--model DIR|FILE.gguf|tinyllama-synthetic (--prompt TEXT | --prompt-ids 1,2,3) [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--repetition-penalty R] [--seed S] [--dtype auto|f32|f16|bf16] [--device cpu|cuda] [--format text|json]"

const generateDoc = `
Generate loads a Llama-family checkpoint directory (config.json,
model.safetensors or its shards, and tokenizer.json or tokenizer.model), or
a GGUF file (.gguf: config and tokenizer embedded, F32, F16, BF16, Q8_0,
Q4_0, Q4_K or Q6_K tensors), and continues a prompt, streaming the text as it is generated. At the end it
prints the time to first token, prefill and decode tokens per second,
per-token latency (p50, p99), load time, cold start (process start to
first token) and the device memory's high-water mark.

--model tinyllama-synthetic is TinyLlama-1.1B's shape with seeded synthetic
weights: it needs no checkpoint, takes --prompt-ids (or --prompt with
--tokenizer) and prints ids unless a tokenizer is given.

Temperature 0 is greedy decoding (the device's argmax). Otherwise the
logits go through the repetition penalty, temperature, top-k and top-p in
that order (Hugging Face's generate) and the token is drawn with a
generator seeded by --seed. --format json prints one JSON object: ids,
text and the figures.`

// generateStats are the figures a generation prints.
type generateStats struct {
	PromptTokens int     `json:"prompt_tokens"`
	NewTokens    int     `json:"new_tokens"`
	LoadMS       float64 `json:"load_ms"`
	TTFTMS       float64 `json:"ttft_ms"`
	PrefillTokS  float64 `json:"prefill_tok_s"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	P50MS        float64 `json:"token_p50_ms"`
	P99MS        float64 `json:"token_p99_ms"`
	ColdStartMS  float64 `json:"cold_start_ms"`
	PeakBytes    int64   `json:"peak_bytes"`
	Device       string  `json:"device"`
	DType        string  `json:"dtype"`
	StoppedAtEOS bool    `json:"stopped_at_eos"`
}

func runGenerate(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("generate", generateSynopsis, generateDoc, stderr)
	var (
		model    = fs.String("model", "", "the checkpoint `directory` (or a weights file, or a .gguf file), or "+syntheticTinyLlama+" (required)")
		config   = fs.String("config", "", "the model's config.json `file` (default: the checkpoint's)")
		tokPath  = fs.String("tokenizer", "", "tokenizer.json or tokenizer.model `file` (default: the checkpoint's)")
		prompt   = fs.String("prompt", "", "the prompt `text` (BOS is added as the tokenizer says)")
		promptID = fs.String("prompt-ids", "", "the prompt as comma-separated token `ids`, used as given")
		maxNew   = fs.Int("max-new-tokens", 100, "tokens to generate")
		temp     = fs.Float64("temperature", 0, "sampling temperature; 0 is greedy")
		topK     = fs.Int("top-k", 0, "keep the K most likely tokens; 0 keeps all")
		topP     = fs.Float64("top-p", 1, "nucleus sampling: keep the most likely tokens up to this probability mass")
		repPen   = fs.Float64("repetition-penalty", 1, "penalty of tokens already in the sequence; 1 is off")
		seed     = fs.Uint64("seed", 0, "seed of the sampling draws")
		dtype    = fs.String("dtype", "auto", "the precision: auto (the checkpoint's torch_dtype), f32, f16 or bf16")
		device   = fs.String("device", "cpu", "the device: "+strings.Join(knownDevices, " or "))
		format   = fs.String("format", "text", "output format: text (streamed) or json")
		noEOS    = fs.Bool("ignore-eos", false, "keep generating after the end-of-sequence token")
	)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case *model == "":
		return usageErrorf("missing required flag --model (see 'zbench generate -h')")
	case (*prompt == "") == (*promptID == ""):
		return usageErrorf("give exactly one of --prompt and --prompt-ids")
	case *maxNew <= 0:
		return usageErrorf("--max-new-tokens %d, want > 0", *maxNew)
	case *format != "text" && *format != "json":
		return usageErrorf("unknown --format %q (want text or json)", *format)
	case !slices.Contains(llamaDTypes, *dtype):
		return usageErrorf("unknown --dtype %q (want %s)", *dtype, strings.Join(llamaDTypes, ", "))
	}
	sampling := llama.Sampling{Temperature: *temp, TopK: *topK, TopP: *topP, RepetitionPenalty: *repPen, Seed: *seed}
	if err := sampling.Validate(); err != nil {
		return usageError{err}
	}
	var ids []int
	if *promptID != "" {
		var err error
		if ids, err = parseIDs(*promptID); err != nil {
			return usageErrorf("--prompt-ids: %v", err)
		}
	}
	dev, err := openDevice(*device)
	if err != nil {
		return err
	}

	start := time.Now()
	m, tok, tokErr, err := openGenerator(dev, *model, *config, *tokPath, *dtype, true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	if err := m.Pack(); err != nil {
		return err
	}
	if err := dev.Sync(); err != nil {
		return fmt.Errorf("loading: %w", err)
	}
	load := time.Since(start)
	if *prompt != "" {
		if tok == nil {
			return fmt.Errorf("--prompt needs a tokenizer: %w (or give --prompt-ids)", tokErr)
		}
		ids = tok.Encode(*prompt, true)
	}
	sess, err := m.NewSession(1, min(len(ids)+*maxNew, m.Config.MaxPositionEmbeddings))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, sess.Close()) }()

	var stream *tokenizer.Stream
	if tok != nil {
		stream = tok.NewStream()
	}
	var text strings.Builder
	emit := func(_, id int) error {
		piece := fmt.Sprintf(" %d", id)
		if stream != nil {
			piece = stream.Push(id)
		}
		text.WriteString(piece)
		if *format == "text" {
			_, err := io.WriteString(stdout, piece)
			return err
		}
		return nil
	}
	dev.ResetPeak()
	g, err := sess.Generate([][]int{ids}, llama.GenerateOptions{MaxNewTokens: *maxNew, Sampling: sampling, StopAtEOS: !*noEOS}, emit)
	if err != nil {
		return err
	}
	if stream != nil {
		rest := stream.Flush()
		text.WriteString(rest)
		if *format == "text" {
			fmt.Fprint(stdout, rest)
		}
	}
	out := g.Tokens[0]
	st := generateStats{
		PromptTokens: len(ids), NewTokens: len(out), LoadMS: ms(load), TTFTMS: ms(g.FirstToken),
		PrefillTokS: float64(len(ids)) / g.FirstToken.Seconds(),
		ColdStartMS: ms(start.Sub(processStart) + load + g.FirstToken),
		PeakBytes:   max(dev.MemStats().PeakBytes, 0), Device: dev.Name(), DType: m.Precision.String(),
		StoppedAtEOS: len(out) > 0 && m.Config.IsEOS(out[len(out)-1]) && !*noEOS,
	}
	if len(g.Steps) > 0 {
		var total time.Duration
		for _, d := range g.Steps {
			total += d
		}
		st.DecodeTokS = float64(len(g.Steps)) / total.Seconds()
		st.P50MS, st.P99MS = ms(quantile(g.Steps, 0.5)), ms(quantile(g.Steps, 0.99))
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		return enc.Encode(struct {
			IDs  []int  `json:"ids"`
			Text string `json:"text"`
			generateStats
		}{out, text.String(), st})
	}
	fmt.Fprintf(stdout, "\n\n")
	fmt.Fprintf(stdout, "prompt      %d tokens, generated %d (%s, %s)\n", st.PromptTokens, st.NewTokens, st.Device, st.DType)
	fmt.Fprintf(stdout, "first token %.1f ms (prefill %.1f tok/s)\n", st.TTFTMS, st.PrefillTokS)
	fmt.Fprintf(stdout, "decode      %.2f tok/s, per token p50 %.2f ms, p99 %.2f ms\n", st.DecodeTokS, st.P50MS, st.P99MS)
	fmt.Fprintf(stdout, "load        %.0f ms, cold start to first token %.0f ms\n", st.LoadMS, st.ColdStartMS)
	fmt.Fprintf(stdout, "peak memory %.1f MiB (device pool high-water mark)\n", float64(st.PeakBytes)/(1<<20))
	return nil
}

// openGenerator loads the model named by --model and its tokenizer:
// --tokenizer, else the checkpoint's own. tok is nil, and tokErr says
// why, when there is none: the prompt must then be ids, which are printed
// as they come. quantized lets a GGUF file's quantized weights stay
// quantized (generation); training needs them in floating point.
func openGenerator(dev kernels.Backend, model, config, tokPath, dtype string, quantized bool) (m *llama.Model, tok *tokenizer.Tokenizer, tokErr error, err error) {
	if tokPath != "" {
		if tok, err = tokenizer.Load(tokPath); err != nil {
			return nil, nil, nil, err
		}
	}
	if model == syntheticTinyLlama {
		prec, err := llamaPrecision(dtype, llama.TinyLlama())
		if err != nil {
			return nil, nil, nil, err
		}
		if tok == nil {
			tokErr = errors.New(syntheticTinyLlama + " has no tokenizer: give --tokenizer")
		}
		m, err = llama.Load(dev, llama.TinyLlama(), llama.Synthetic(tinyLlamaSeed), prec)
		return m, tok, tokErr, err
	}
	if isGGUF(model) {
		if config != "" {
			return nil, nil, nil, usageErrorf("--config: the GGUF file %s carries its own config", model)
		}
		var own *tokenizer.Tokenizer
		m, own, tokErr, err = loadLlamaGGUF(dev, model, dtype, quantized)
		if tok == nil {
			tok = own
		}
		return m, tok, tokErr, err
	}
	files, err := checkpoint.Resolve(model, config)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := checkGenerates(files.Config); err != nil {
		return nil, nil, nil, err
	}
	if tok == nil {
		tok, tokErr = tokenizer.Load(filepath.Dir(files.Weights[0]))
	}
	m, err = loadLlama(dev, files, dtype)
	return m, tok, tokErr, err
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// quantile is the q-quantile of ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
