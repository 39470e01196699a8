package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zbench/zbench/models/tokenizer"
	"github.com/zbench/zbench/zbench/loadgen"
)

const loadSynopsis = "[--url URL] [--model NAME] [--scenario server|offline|singlestream] [--rate R | --sweep R1,R2,…] [--requests N] [--dataset FILE [--tokenizer FILE] | --prompt-words MIN:MAX --output-tokens MIN:MAX] [flags]"

const loadDoc = `
Load sends requests to a server that speaks the OpenAI completions API
(zbench serve, llama.cpp's server, vLLM) in one of MLPerf Inference's
scenarios, streams every response, and prints the results in Go's benchmark
format (on stdout, or --o), a line per run, with a verdict per run on
stderr:

  offline       every request at once (at most --concurrency in flight):
                throughput;
  server        Poisson arrivals at --rate requests a second, open loop:
                latency under load, PASS when no request failed and the
                99th percentiles of time to first token (TTFT) and time per
                output token after it (TPOT) are within --ttft-bound and
                --tpot-bound;
  singlestream  one request at a time.

A server run sends --requests, and with --min-duration goes on until its
arrivals span that long (MLPerf's min_query_count and min_duration): a
short run at a rate the server cannot sustain ends before its queue
builds, and passes where a long one fails.

--sweep runs the server scenario at each rate of a comma-separated,
ascending list until one fails, then bisects between the last rate that
passed and the first that failed --refine times (between a quarter of the
first rate and it when none passed), and reports the highest rate that
passed.

Each result line has the requests completed (as its iterations), req/s,
out-tok/s, goodput-req/s (requests whose own TTFT and TPOT are within the
bounds, a second), the 50th, 90th and 99th percentiles in milliseconds of
TTFT, TPOT, the inter-token latency (ITL, between chunks of text) and the
end-to-end latency (e2e), the errors, and pass (1 or 0); benchstat and
'zbench compare' read it.

Requests come from --dataset FILE, or are synthetic (seeded by --seed):
prompts of --prompt-words words, asking for --output-tokens tokens. A
dataset's format is told by its name, else by its first character other
than white space ('[' is ShareGPT):

  JSONL     (.jsonl) a line per request, {"prompt": "…", "output_tokens":
            N}, sent in order.
  ShareGPT  (.json) as vLLM's serving benchmark reads it: a JSON array of
            {"conversations": [{"from": "human", "value": "…"}, {"from":
            "gpt", "value": "…"}, …]}. A conversation's first human turn
            is a prompt, and the gpt turn right after it the output to ask
            for, counted in tokens by --tokenizer (required: the served
            model's tokenizer.json or tokenizer.model, or its checkpoint
            directory; counts include the special tokens it adds, as
            vLLM's do). Conversations of fewer than two turns, or without
            such a pair, are left out; the rest are shuffled (seeded by
            --seed) and taken in that order, skipping prompts or replies
            under 4 tokens, prompts over 1024 and pairs over 2048 (vLLM's
            limits), until --requests are taken.

A dataset is sent again from its first request when --requests is more;
the loadgen-dataset configuration line names the file, its format and the
requests it gave (ShareGPT: its conversations and the tokenizer too). Each
request asks for its output tokens with "ignore_eos" (unless
--stop-at-eos), at temperature 0; the token count is the server's usage
figure, else its chunks of text. Without --model, the first model GET
/v1/models lists is used.

The exit status is 1 when a run fails its verdict (a sweep: when no rate
passed). Interrupted (Ctrl-C, SIGTERM), it stops sending, waits for the
requests in flight, and reports what completed.`

func runLoad(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("load", loadSynopsis, loadDoc, stderr)
	var (
		url         = fs.String("url", "http://127.0.0.1:8080", "the server's root `URL`")
		model       = fs.String("model", "", "the requests' model (default: the first the server lists)")
		scenario    = fs.String("scenario", "server", "offline, server or singlestream")
		rate        = fs.Float64("rate", 1, "server: mean arrivals a second")
		sweep       = fs.String("sweep", "", "server: ascending comma-separated `rates` to sweep")
		refine      = fs.Int("refine", 2, "sweep: bisections after the first failing rate")
		requests    = fs.Int("requests", 64, "requests per run")
		minDuration = fs.Duration("min-duration", 0, "server: send on past --requests until the arrivals span this long (MLPerf's min_duration)")
		concurrency = fs.Int("concurrency", 0, "offline: most requests in flight (0: all)")
		dataset     = fs.String("dataset", "", "JSONL or ShareGPT JSON `file` of requests (default: synthetic)")
		tokPath     = fs.String("tokenizer", "", "ShareGPT: tokenizer.json or tokenizer.model `file`, or checkpoint directory, counting output tokens")
		words       = fs.String("prompt-words", "32:256", "synthetic prompts' words, N or MIN:MAX")
		outTokens   = fs.String("output-tokens", "16:128", "synthetic requests' output tokens, N or MIN:MAX")
		seed        = fs.Uint64("seed", 1, "seed of the synthetic dataset, the ShareGPT shuffle and the arrivals")
		ttftBound   = fs.Duration("ttft-bound", 2*time.Second, "server: bound on TTFT's 99th percentile (0: none)")
		tpotBound   = fs.Duration("tpot-bound", 200*time.Millisecond, "server: bound on TPOT's 99th percentile (0: none)")
		chat        = fs.Bool("chat", false, "send /v1/chat/completions (the prompt as one user message)")
		stopAtEOS   = fs.Bool("stop-at-eos", false, "let the model stop at its end-of-sequence token")
		timeout     = fs.Duration("timeout", 10*time.Minute, "bound on one request")
		name        = fs.String("name", "BenchmarkLoad", "the result lines' benchmark `name`, before /scenario=…")
		out         = fs.String("o", "", "write the results to `file` instead of stdout")
	)
	if _, err := parseArgs(fs, args, stdout); err != nil {
		return err
	}
	kind, err := loadgen.ParseKind(*scenario)
	if err != nil {
		return usageErrorf("--scenario: %v", err)
	}
	var rates []float64
	if *sweep != "" {
		if kind != loadgen.Server {
			return usageErrorf("--sweep runs the server scenario, not %s", kind)
		}
		for f := range strings.SplitSeq(*sweep, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(r > 0) {
				return usageErrorf("--sweep %q: want positive rates separated by commas", *sweep)
			}
			rates = append(rates, r)
		}
	}
	switch {
	case *requests < 1:
		return usageErrorf("--requests %d: want at least 1", *requests)
	case kind == loadgen.Server && *sweep == "" && !(*rate > 0):
		return usageErrorf("--rate %g: want a positive rate", *rate)
	case *concurrency < 0:
		return usageErrorf("--concurrency %d: want 0 or more", *concurrency)
	case *refine < 0:
		return usageErrorf("--refine %d: want 0 or more", *refine)
	case *timeout <= 0:
		return usageErrorf("--timeout %v: want a positive duration", *timeout)
	case *ttftBound < 0 || *tpotBound < 0:
		return usageErrorf("--ttft-bound and --tpot-bound: want 0 or more")
	case *minDuration < 0:
		return usageErrorf("--min-duration %v: want 0 or more", *minDuration)
	}
	items, source, err := loadItems(*dataset, *tokPath, *words, *outTokens, *requests, *seed)
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	c := &loadgen.Client{BaseURL: *url, Model: *model, Chat: *chat, StopAtEOS: *stopAtEOS,
		HTTP: &http.Client{Timeout: *timeout, Transport: loadgen.Transport}}
	if c.Model == "" {
		ids, err := c.Models(ctx)
		if err != nil {
			return fmt.Errorf("--model not given, and the server's models: %w", err)
		}
		if len(ids) == 0 {
			return fmt.Errorf("--model not given, and %s/v1/models lists none", *url)
		}
		c.Model = ids[0]
	}
	w := stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bounds := loadgen.Bounds{TTFT: *ttftBound, TPOT: *tpotBound}
	fmt.Fprintf(w, "loadgen-url: %s\nloadgen-model: %s\nloadgen-api: %s\nloadgen-dataset: %s\nloadgen-seed: %d\nloadgen-ttft-bound: %v\nloadgen-tpot-bound: %v\n",
		*url, c.Model, map[bool]string{false: "/v1/completions", true: "/v1/chat/completions"}[*chat], source, *seed, *ttftBound, *tpotBound)
	if *minDuration > 0 {
		fmt.Fprintf(w, "loadgen-min-duration: %v\n", *minDuration)
	}
	fmt.Fprint(w, loadgen.Units)
	sc := loadgen.Scenario{Kind: kind, Rate: *rate, Requests: *requests, Concurrency: *concurrency, Seed: *seed, MinDuration: *minDuration}
	write := func(s loadgen.Summary) error {
		fmt.Fprintln(stderr, s.Verdict())
		return s.WriteBench(w, benchName(*name, s.Scenario))
	}
	if rates != nil {
		p := newProgress(stderr, "load")
		sums, best, err := loadgen.Sweep(ctx, c, items, sc, rates, bounds, *refine, func(r float64, done, total int) {
			p.step(done, total, fmt.Sprintf("%g req/s", r))
		})
		p.finish()
		for _, s := range sums {
			if werr := write(s); werr != nil {
				return werr
			}
		}
		if err != nil {
			return interruptedOr(ctx, err)
		}
		if best == 0 {
			return fmt.Errorf("no rate of the sweep passed (TTFT p99 ≤ %v, TPOT p99 ≤ %v)", *ttftBound, *tpotBound)
		}
		fmt.Fprintf(stderr, "highest rate that passed: %g req/s\n", best)
		return nil
	}
	p := newProgress(stderr, "load")
	o, err := loadgen.Run(ctx, c, items, sc, func(done, total int) { p.step(done, total, kind.String()) })
	p.finish()
	if err != nil {
		return err
	}
	s := loadgen.Summarize(o, bounds)
	if err := write(s); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return interruptedOr(ctx, ctx.Err())
	}
	if !s.Pass {
		return fmt.Errorf("%s: FAIL", kind)
	}
	return nil
}

// interruptedOr names an interruption as one, else returns err.
func interruptedOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return err
}

// loadItems reads the dataset file, or makes n synthetic requests, and
// describes their source for the results' configuration. A ShareGPT
// dataset gives at most n requests, its output tokens counted by the
// tokenizer at tokPath.
func loadItems(path, tokPath, words, outTokens string, n int, seed uint64) ([]loadgen.Item, string, error) {
	if path == "" {
		if tokPath != "" {
			return nil, "", usageErrorf("--tokenizer counts the output tokens of a ShareGPT --dataset, and none is given")
		}
		w, err := loadgen.ParseRange(words)
		if err != nil {
			return nil, "", usageErrorf("--prompt-words: %v", err)
		}
		o, err := loadgen.ParseRange(outTokens)
		if err != nil {
			return nil, "", usageErrorf("--output-tokens: %v", err)
		}
		return loadgen.Synthetic(n, w, o, seed), fmt.Sprintf("synthetic prompt-words=%v output-tokens=%v", w, o), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	if !isShareGPT(path, r) {
		if tokPath != "" {
			return nil, "", usageErrorf("--tokenizer counts the output tokens of a ShareGPT --dataset, and %s is JSONL, whose requests give theirs", path)
		}
		items, err := loadgen.ReadJSONL(r, path)
		return items, fmt.Sprintf("%s format=jsonl requests=%d", path, len(items)), err
	}
	if tokPath == "" {
		return nil, "", usageErrorf("--dataset %s is ShareGPT, whose output lengths are counted in tokens: give the served model's --tokenizer", path)
	}
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		return nil, "", fmt.Errorf("--tokenizer: %w", err)
	}
	d, err := loadgen.ReadShareGPT(r, path)
	if err != nil {
		return nil, "", err
	}
	items, err := d.Sample(n, seed, func(s string) int { return len(tok.Encode(s, true)) }, loadgen.DefaultShareGPTLimits)
	if err != nil {
		return nil, "", err
	}
	return items, fmt.Sprintf("%s format=sharegpt conversations=%d requests=%d tokenizer=%s", path, d.Conversations, len(items), tokPath), nil
}

// isShareGPT tells a dataset's format: ShareGPT when its name ends in
// .json, JSONL when in .jsonl, else ShareGPT when its first character
// that is not white space is '['.
func isShareGPT(path string, r *bufio.Reader) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return true
	case ".jsonl":
		return false
	}
	for i := 1; ; i++ {
		b, err := r.Peek(i)
		if err != nil {
			return false
		}
		switch c := b[i-1]; c {
		case ' ', '\t', '\n', '\r':
		default:
			return c == '['
		}
	}
}

// benchName is a run's result name: name/scenario=…, with the server's
// rate or offline's concurrency.
func benchName(name string, sc loadgen.Scenario) string {
	s := fmt.Sprintf("%s/scenario=%s", name, sc.Kind)
	switch {
	case sc.Kind == loadgen.Server:
		s += fmt.Sprintf("/rate=%g", sc.Rate)
	case sc.Kind == loadgen.Offline && sc.Concurrency > 0:
		s += fmt.Sprintf("/concurrency=%d", sc.Concurrency)
	}
	return s
}
