package bench_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/tokenizer"
	"github.com/zbench/zbench/zbench/loadgen"
	"github.com/zbench/zbench/zbench/serve"
)

// serveModel is a model BenchmarkServe serves on a device, with its
// tokenizer, and the engine's and load's sizes for it.
type serveModel struct {
	name string
	load func(dev kernels.Backend) (*llama.Model, *tokenizer.Tokenizer, error)
	// maxBatch is the engine's; requests, output and rate the load's.
	maxBatch, requests, output int
	rate                       float64
}

// llama2Tokenizer is Llama 2's tokenizer, TinyLlama's ('make
// tokenizer-ref' writes it).
var llama2Tokenizer = filepath.Join("..", ".cache", "tokenizer-ref", "llama2", "tokenizer.json")

// serveModels are BenchmarkServe's models on dev: on the CPU, a
// TinyLlama-width 2-layer model in f32 and TinyLlama in f16; on a GPU,
// TinyLlama in bf16 with batches of up to 256 (the llama-tiny checkpoint
// alone in -short mode).
func serveModels(dev kernels.Backend) []serveModel {
	synthetic := func(cfg llama.Config, p nn.Precision) func(kernels.Backend) (*llama.Model, *tokenizer.Tokenizer, error) {
		return func(dev kernels.Backend) (*llama.Model, *tokenizer.Tokenizer, error) {
			tok, err := tokenizer.Load(llama2Tokenizer)
			if err != nil {
				return nil, nil, fmt.Errorf("%w (make tokenizer-ref writes it)", err)
			}
			m, err := llama.Load(dev, cfg, llama.Synthetic(llamaSeed), p)
			return m, tok, err
		}
	}
	if testing.Short() {
		return []serveModel{{name: "llama-tiny", maxBatch: 16, requests: 4, output: 32, rate: 20,
			load: func(dev kernels.Backend) (*llama.Model, *tokenizer.Tokenizer, error) {
				cfg, ck, err := openLlamaTiny()
				if err != nil {
					return nil, nil, err
				}
				tok, err := tokenizer.Load(llamaTinyDir)
				if err != nil {
					return nil, nil, err
				}
				m, err := llama.Load(dev, cfg, ck, nn.F32)
				return m, tok, err
			}}}
	}
	if dev.Name() != "cpu" {
		return []serveModel{{name: "tinyllama", load: synthetic(llama.TinyLlama(), nn.BF16), maxBatch: 256, requests: 1024, output: 128, rate: 100}}
	}
	twoLayer := llama.TinyLlama()
	twoLayer.NumHiddenLayers = 2
	return []serveModel{
		{name: "tinyllama-2layer", load: synthetic(twoLayer, nn.F32), maxBatch: 16, requests: 16, output: 32, rate: 1},
		{name: "tinyllama", load: synthetic(llama.TinyLlama(), nn.F16), maxBatch: 16, requests: 16, output: 32, rate: 1},
	}
}

// BenchmarkServe runs zbench serve in process on a loopback port against
// zbench load, on every device with the PagedKV ops: the Offline scenario
// (every request at once) and the Server one (Poisson arrivals), synthetic
// prompts of 16–48 words asking for a fixed number of tokens each, greedy.
// Each op is one scenario's run of its requests; out-tok/s, req/s and the
// TTFT and TPOT percentiles are the last run's. Before timing, one
// request's text is checked against Session.Generate's for its prompt.
func BenchmarkServe(b *testing.B) {
	for _, dev := range devicesWith[kernels.PagedKV]() {
		for _, sm := range serveModels(dev) {
			benchServe(b, dev, sm)
		}
	}
}

// benchServe is BenchmarkServe's runs of one model on dev.
func benchServe(b *testing.B, dev kernels.Backend, sm serveModel) {
	m, tok, err := sm.load(dev)
	if err != nil {
		b.Fatalf("%s: %v", sm.name, err)
	}
	if err := m.Pack(); err != nil { // as zbench serve packs the weights
		b.Fatalf("%s: %v", sm.name, err)
	}
	// Blocks for every sequence of a full batch at its longest: a chunk of
	// prompt and the output, or the context.
	const blockSize, chunk = 16, 256
	longest := min(m.Config.MaxPositionEmbeddings, chunk+sm.output)
	e, err := serve.NewEngine(m, serve.Options{MaxBatch: sm.maxBatch, ChunkTokens: chunk, BlockSize: blockSize,
		Blocks: sm.maxBatch * ((longest + blockSize - 1) / blockSize), MaxQueue: max(256, sm.requests)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- e.Run(ctx) }()
	s, err := serve.NewServer(e, tok, sm.name)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	c := &loadgen.Client{BaseURL: srv.URL, Model: sm.name}
	items := loadgen.Synthetic(sm.requests, loadgen.Range{Min: 16, Max: 48}, loadgen.Range{Min: sm.output, Max: sm.output}, 1)
	verifyServe(b, c, m, tok, items[0])
	for _, sc := range []loadgen.Scenario{{Kind: loadgen.Offline, Requests: sm.requests}, {Kind: loadgen.Server, Requests: sm.requests, Rate: sm.rate, Seed: 1}} {
		name := fmt.Sprintf("dev=%s/model=%s/scenario=%s", dev.Name(), sm.name, sc.Kind)
		if sc.Kind == loadgen.Server {
			name += fmt.Sprintf("/rate=%g", sc.Rate)
		}
		b.Run(name, func(b *testing.B) {
			var o *loadgen.Outcome
			for b.Loop() {
				var err error
				if o, err = loadgen.Run(context.Background(), c, items, sc, nil); err != nil {
					b.Fatal(err)
				}
				for _, r := range o.Results {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			s := loadgen.Summarize(o, loadgen.Bounds{}) // the figures, not a verdict
			b.ReportMetric(s.OutputTokPerSec, "tok/s")
			b.ReportMetric(s.RequestsPerSec, "req/s")
			b.ReportMetric(s.TTFT.P50, "ttft-ms")
			b.ReportMetric(s.TTFT.P99, "ttft-p99-ms")
			b.ReportMetric(s.TPOT.P50, "tpot-ms")
			b.ReportMetric(s.TPOT.P99, "tpot-p99-ms")
		})
	}
	srv.Close()
	e.Shutdown()
	cancel()
	<-ran
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
}

// verifyServe checks that the server's greedy text for it is what
// Session.Generate makes of its prompt.
func verifyServe(b *testing.B, c *loadgen.Client, m *llama.Model, tok *tokenizer.Tokenizer, it loadgen.Item) {
	b.Helper()
	r := c.Do(context.Background(), it)
	if r.Err != nil {
		b.Fatal(r.Err)
	}
	prompt := tok.Encode(it.Prompt, true)
	s, err := m.NewSession(1, len(prompt)+it.OutputTokens)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	g, err := s.Generate([][]int{prompt}, llama.GenerateOptions{MaxNewTokens: it.OutputTokens}, nil)
	if err != nil {
		b.Fatal(err)
	}
	want, err := tok.Decode(g.Tokens[0])
	if err != nil {
		b.Fatal(err)
	}
	if r.Text != want || r.OutputTokens != len(g.Tokens[0]) {
		b.Fatalf("the server generated %q (%d tokens), Session.Generate %q (%d)", r.Text, r.OutputTokens, want, len(g.Tokens[0]))
	}
}
