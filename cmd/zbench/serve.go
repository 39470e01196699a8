package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/zbench/serve"
)

const serveSynopsis = "--model DIR|FILE.gguf|tinyllama-synthetic [--tokenizer FILE] [--addr HOST:PORT] [--max-batch N] [--chunk-tokens N] [--kv-memory BYTES | --kv-blocks N] [flags]"

const serveDoc = `
Serve loads a Llama-family model as generate does (a checkpoint directory,
a .gguf file, or tinyllama-synthetic with --tokenizer) and serves it over
HTTP with the OpenAI completions API, for any client or load generator that
speaks it ('zbench load', vLLM's benchmark, the OpenAI SDKs):

  POST /v1/completions       a prompt (text, or an array of token ids)
  POST /v1/chat/completions  messages, laid out in the checkpoint's chat
                             template (Jinja: chat_template.jinja or
                             tokenizer_config.json's chat_template, a GGUF
                             file's tokenizer.chat_template), else in the
                             plain one: BOS, "<|role|>\n" content EOS "\n" …
                             "<|assistant|>\n" (Zephyr's, TinyLlama-Chat's)
  GET  /v1/models, GET /health, GET /metrics (Prometheus' text format)

with "stream": true (server-sent events, "stream_options": {"include_usage":
true}), max_tokens, temperature, top_p, top_k, seed, stop, repetition_penalty
and ignore_eos. A request that is not valid gets a 4xx with a JSON error
naming the field.

Requests run with continuous batching on a paged KV cache: every step, the
running sequences decode one token each, and one chunk of at most
--chunk-tokens tokens of the oldest waiting prompt is prefilled, where the
pool has the blocks for it and keeps one for each running sequence; at most
--max-batch sequences run, --max-queue more wait (a 429 beyond). A request
leaves the batch when it ends or its client disconnects, its blocks back in
the pool at once; when the pool runs short of a block for a running
sequence, the newest is preempted and waits again (its tokens recomputed
when it resumes). The pool is --kv-blocks blocks of --block-size positions,
or as many as --kv-memory holds (at most what --max-batch sequences hold at
the model's full context).

SIGINT or SIGTERM stops it gracefully: /health turns 503, new requests are
refused, and those running finish (up to --drain, then they are aborted).`

func runServe(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("serve", serveSynopsis, serveDoc, stderr)
	var (
		model     = fs.String("model", "", "the checkpoint `directory`, .gguf file, or "+syntheticTinyLlama+" (required)")
		config    = fs.String("config", "", "the model's config.json `file` (default: the checkpoint's)")
		tokPath   = fs.String("tokenizer", "", "tokenizer.json or tokenizer.model `file` (default: the checkpoint's)")
		name      = fs.String("name", "", "the model's name in the API (default: the --model's base name)")
		dtype     = fs.String("dtype", "auto", "weights and activations: "+strings.Join(llamaDTypes, ", "))
		device    = fs.String("device", "cpu", "the device: "+strings.Join(knownDevices, " or "))
		addr      = fs.String("addr", "127.0.0.1:8080", "the `address` to listen on")
		maxBatch  = fs.Int("max-batch", 16, "the most sequences a decode step runs")
		chunk     = fs.Int("chunk-tokens", 256, "the most prompt tokens a prefill step runs")
		blockSize = fs.Int("block-size", 16, "positions per KV-cache block")
		kvBlocks  = fs.Int("kv-blocks", 0, "KV-cache blocks (0: as many as --kv-memory holds, at most --max-batch sequences at full context)")
		kvMemory  = fs.Int64("kv-memory", 1<<30, "KV-cache `bytes`, when --kv-blocks is 0")
		maxQueue  = fs.Int("max-queue", 256, "the most requests waiting to start")
		drain     = fs.Duration("drain", 60*time.Second, "on SIGTERM, how long running requests may take to finish")
	)
	if _, err := parseArgs(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case *model == "":
		return usageErrorf("missing required flag --model (see 'zbench serve -h')")
	case !slices.Contains(llamaDTypes, *dtype):
		return usageErrorf("unknown --dtype %q (want %s)", *dtype, strings.Join(llamaDTypes, ", "))
	case *maxBatch < 1 || *chunk < 1 || *blockSize < 1 || *maxQueue < 1 || *kvBlocks < 0 || *kvMemory < 1:
		return usageErrorf("--max-batch, --chunk-tokens, --block-size, --max-queue and --kv-memory want at least 1, --kv-blocks 0 or more")
	case *drain < 0:
		return usageErrorf("--drain %v: want 0 or more", *drain)
	case *model == syntheticTinyLlama && *tokPath == "":
		return usageErrorf("--model %s has no tokenizer: serving needs --tokenizer (Llama 2's, which 'make tokenizer-ref' writes to .cache/tokenizer-ref/llama2/tokenizer.json)", syntheticTinyLlama)
	}
	dev, err := openDevice(*device)
	if err != nil {
		return err
	}
	m, tok, tokErr, err := openGenerator(dev, *model, *config, *tokPath, *dtype, true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	if err := m.Pack(); err != nil {
		return err
	}
	if tok == nil {
		return fmt.Errorf("serving needs a tokenizer: %w", tokErr)
	}
	if *name == "" {
		*name = modelName(*model)
	}
	o := serve.Options{MaxBatch: *maxBatch, ChunkTokens: *chunk, BlockSize: *blockSize, Blocks: *kvBlocks, MaxQueue: *maxQueue}
	if o.Blocks == 0 {
		// As many as the memory holds, but no more than the running
		// batch can hold at full context.
		full := o.MaxBatch * ((m.Config.MaxPositionEmbeddings + o.BlockSize - 1) / o.BlockSize)
		o.Blocks = int(min(*kvMemory/blockBytes(m, *blockSize), int64(full)))
		if o.Blocks < 1 {
			return usageErrorf("--kv-memory %d holds no block of %d bytes", *kvMemory, blockBytes(m, *blockSize))
		}
	}
	e, err := serve.NewEngine(m, o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.Close()) }()
	// The buffers the model was read and converted through go back now,
	// not in the middle of the first requests.
	dev.TrimCache()
	debug.FreeOSMemory() // a collection, then the freed memory returned
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	s, err := serve.NewServer(e, tok, *name)
	if err != nil {
		return err
	}
	template := "the plain chat template"
	if tok.ChatTemplate() != "" {
		template = "the tokenizer's chat template"
	}
	ctx, stop := signalContext()
	defer stop()
	fmt.Fprintf(stderr, "serving %s (%s, %s) on http://%s: %d KV blocks of %d positions, batch ≤ %d, prefill chunks ≤ %d tokens, %s\n",
		*name, dev.Name(), m.Precision, ln.Addr(), o.Blocks, o.BlockSize, o.MaxBatch, o.ChunkTokens, template)
	return serveUntil(ctx, e, s, ln, *drain)
}

// blockBytes is a KV-cache block's bytes: keys and values of every layer.
func blockBytes(m *llama.Model, blockSize int) int64 {
	c := m.Config
	return 2 * int64(c.NumHiddenLayers) * int64(c.KVDim()) * int64(blockSize) * int64(m.Precision.DType().Size())
}

// modelName is the API's name of --model: a checkpoint's directory or
// file name without its extension.
func modelName(model string) string {
	base := strings.TrimSuffix(strings.TrimRight(model, "/"), ".gguf")
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	return base
}

// serveUntil serves on ln until ctx is done, then stops gracefully: new
// requests refused, running ones given drain to finish.
func serveUntil(ctx context.Context, e *serve.Engine, s *serve.Server, ln net.Listener, drain time.Duration) error {
	engineCtx, cancelEngine := context.WithCancel(context.Background())
	defer cancelEngine()
	ran := make(chan error, 1)
	go func() { ran <- e.Run(engineCtx) }()
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		e.Shutdown()
		cancelEngine()
		return errors.Join(err, <-ran)
	case err := <-ran:
		return errors.Join(fmt.Errorf("the engine stopped: %w", err), hs.Close())
	case <-ctx.Done():
	}
	s.Closing()
	e.Shutdown()
	shutdown, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := hs.Shutdown(shutdown) // waits for the handlers, and so for their requests
	if err != nil {
		cancelEngine() // past the drain: abort what is left
		err = errors.Join(err, hs.Close())
	}
	if rerr := <-ran; rerr != nil && !errors.Is(rerr, context.Canceled) {
		err = errors.Join(err, rerr)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("requests still running after --drain: aborted")
	}
	return err
}
