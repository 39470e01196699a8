package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/chat"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/tokenizer"
)

// tinyDir is a real Llama checkpoint with its tokenizer (the goldens').
var tinyDir = filepath.Join("..", "..", "testdata", "golden", "llama-tiny")

type testServer struct {
	*httptest.Server
	m   *llama.Model
	tok *tokenizer.Tokenizer
	e   *Engine
}

func newTestServer(t *testing.T, o Options) *testServer {
	t.Helper()
	return newTestServerTok(t, o, tinyDir)
}

// newTestServerTok is newTestServer with the tokenizer of tokDir.
func newTestServerTok(t *testing.T, o Options, tokDir string) *testServer {
	t.Helper()
	cfg, err := llama.LoadConfig(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err)
	ck, err := llama.OpenCheckpoint(filepath.Join(tinyDir, "model.safetensors"))
	require.NoError(t, err)
	m, err := llama.Load(cpu.New(), cfg, ck, nn.F32)
	require.NoError(t, err)
	tok, err := tokenizer.Load(tokDir)
	require.NoError(t, err)
	e, stop := startEngine(t, m, o)
	s, err := NewServer(e, tok, "tiny")
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		stop()
		require.NoError(t, m.Close())
	})
	return &testServer{Server: srv, m: m, tok: tok, e: e}
}

// post sends body to path and returns the status and the response body.
func (ts *testServer) post(t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// streamText reads a completion stream: its text, finish reason and
// usage.
func streamText(t *testing.T, r io.Reader, chat bool) (text, finish string, usage map[string]int) {
	t.Helper()
	s := bufio.NewScanner(r)
	done := false
	for s.Scan() {
		line := s.Text()
		if line == "" {
			continue
		}
		require.True(t, strings.HasPrefix(line, "data: "), line)
		data := strings.TrimPrefix(line, "data: ")
		if data == "[DONE]" {
			done = true
			break
		}
		var c struct {
			Choices []struct {
				Text         string `json:"text"`
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
			Usage map[string]int
		}
		require.NoError(t, json.Unmarshal([]byte(data), &c), data)
		for _, ch := range c.Choices {
			text += ch.Text + ch.Delta.Content
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			usage = c.Usage
		}
	}
	require.True(t, done, "the stream ends with [DONE]")
	return text, finish, usage
}

// greedyText is what Session.Generate makes of prompt, decoded.
func (ts *testServer) greedyText(t *testing.T, prompt string, n int) string {
	t.Helper()
	ids := alone(t, ts.m, Request{Prompt: ts.tok.Encode(prompt, true), MaxTokens: n, IgnoreEOS: true})
	text, err := ts.tok.Decode(ids)
	require.NoError(t, err)
	return text
}

// TestConcurrentGreedyMatchesGenerate sends many streamed and whole
// requests of different lengths at once: each one's text is what
// Session.Generate makes of its prompt alone.
func TestConcurrentGreedyMatchesGenerate(t *testing.T) {
	ts := newTestServer(t, Options{MaxBatch: 4, ChunkTokens: 16, Blocks: 64, BlockSize: 8, MaxQueue: 32})
	prompts := []string{"Hello", "The quick brown fox jumps over", "a b c d e f g h i j k l m n o p q r s t u v w x y z",
		"Once upon a time", "1 2 3", "zbench", "The end of the story is near, said the", "Why?"}
	got := make([]string, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"tiny","prompt":%q,"max_tokens":%d,"temperature":0,"ignore_eos":true,"stream":%t,"stream_options":%s}`,
				p, 5+3*i, i%2 == 0, map[bool]string{true: `{"include_usage":true}`, false: "null"}[i%2 == 0])
			resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
			if !assert.NoError(t, err) {
				return
			}
			defer resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			if i%2 == 0 {
				text, finish, usage := streamText(t, resp.Body, false)
				assert.Equal(t, "length", finish)
				assert.Equal(t, 5+3*i, usage["completion_tokens"])
				got[i] = text
				return
			}
			var r struct {
				Choices []struct {
					Text         string `json:"text"`
					FinishReason string `json:"finish_reason"`
				}
				Usage map[string]int
			}
			assert.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
			got[i] = r.Choices[0].Text
			assert.Equal(t, 5+3*i, r.Usage["completion_tokens"])
		})
	}
	wg.Wait()
	for i, p := range prompts {
		assert.Equal(t, ts.greedyText(t, p, 5+3*i), got[i], "prompt %d", i)
	}
}

func TestStopAndChat(t *testing.T) {
	ts := newTestServer(t, Options{MaxBatch: 4, ChunkTokens: 16, Blocks: 64, BlockSize: 8, MaxQueue: 8})
	full := ts.greedyText(t, "Once upon a time", 24)
	require.Greater(t, len(full), 8)
	stop := string([]rune(full)[3:5])
	want := full[:strings.Index(full, stop)]
	quoted, err := json.Marshal(stop)
	require.NoError(t, err)
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"ignore_eos":true,"stop":[%s],"stream":%t}`, quoted, stream)
		resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		if stream {
			text, finish, _ := streamText(t, resp.Body, false)
			assert.Equal(t, want, text)
			assert.Equal(t, "stop", finish)
		} else {
			var r struct {
				Choices []struct {
					Text         string `json:"text"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
			require.Len(t, r.Choices, 1)
			assert.Equal(t, want, r.Choices[0].Text)
			assert.Equal(t, "stop", r.Choices[0].FinishReason)
		}
		resp.Body.Close()
	}
	code, body := ts.post(t, "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":6,"temperature":0,"ignore_eos":true}`)
	require.Equal(t, http.StatusOK, code, string(body))
	var c struct {
		Object  string
		Choices []struct {
			Message struct{ Role, Content string }
		}
	}
	require.NoError(t, json.Unmarshal(body, &c))
	assert.Equal(t, "chat.completion", c.Object)
	assert.Equal(t, "assistant", c.Choices[0].Message.Role)
	ids := alone(t, ts.m, Request{Prompt: ts.tok.Encode("<s><|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\n", false), MaxTokens: 6, IgnoreEOS: true})
	want, err = ts.tok.Decode(ids)
	require.NoError(t, err)
	assert.Equal(t, want, c.Choices[0].Message.Content)
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"stream":true,"temperature":0}`))
	require.NoError(t, err)
	_, finish, _ := streamText(t, resp.Body, true)
	resp.Body.Close()
	assert.Contains(t, []string{"length", "stop"}, finish)
}

// TestTokenizerChatTemplate serves chat completions in the chat template
// of the tokenizer's tokenizer_config.json, the prompt encoded without
// special tokens added, and refuses a conversation the template raises an
// exception on.
func TestTokenizerChatTemplate(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(tinyDir, tokenizer.JSONFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, tokenizer.JSONFile), data, 0o644))
	template := "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}" +
		"{{ bos_token ~ '[' ~ m.role | upper ~ '] ' ~ m.content ~ ' ' }}{% endfor %}{% if add_generation_prompt %}[ASSISTANT]{% endif %}"
	cfg, err := json.Marshal(map[string]string{"chat_template": template})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, tokenizer.ConfigFile), cfg, 0o644))
	ts := newTestServerTok(t, Options{MaxBatch: 2, ChunkTokens: 16, Blocks: 64, BlockSize: 8, MaxQueue: 4}, dir)

	code, body := ts.post(t, "/v1/chat/completions", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":5,"temperature":0,"ignore_eos":true}`)
	require.Equal(t, http.StatusOK, code, string(body))
	var c struct {
		Choices []struct{ Message struct{ Content string } }
		Usage   map[string]int
	}
	require.NoError(t, json.Unmarshal(body, &c))
	prompt := ts.tok.Encode("<s>[SYSTEM] Be brief. <s>[USER] Hi [ASSISTANT]", false)
	assert.Equal(t, len(prompt), c.Usage["prompt_tokens"])
	want, err := ts.tok.Decode(alone(t, ts.m, Request{Prompt: prompt, MaxTokens: 5, IgnoreEOS: true}))
	require.NoError(t, err)
	assert.Equal(t, want, c.Choices[0].Message.Content)

	code, body = ts.post(t, "/v1/chat/completions", `{"messages":[{"role":"tool","content":"{}"}]}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, string(body), "no tools here")
}

// TestBadRequests sends malformed and hostile requests: each gets a 4xx
// with a JSON error naming the field, and the server goes on serving.
func TestBadRequests(t *testing.T) {
	ts := newTestServer(t, Options{MaxBatch: 2, ChunkTokens: 16, Blocks: 40, BlockSize: 8, MaxQueue: 8})
	long := strings.Repeat("word ", 400)
	for _, c := range []struct {
		name, path, body string
		status           int
		param, msg       string
	}{
		{"malformed JSON", "/v1/completions", `{"prompt": "a",`, 400, "", "malformed JSON"},
		{"two values", "/v1/completions", `{"prompt":"a"} {}`, 400, "", "more than one value"},
		{"a bracket after the body", "/v1/completions", `{"prompt":"a"}]`, 400, "", "bytes after it"},
		{"invalid UTF-8", "/v1/completions", "{\"prompt\":\"\xff\xfe\"}", 400, "", "not valid UTF-8"},
		{"unknown model", "/v1/completions", `{"model":"gpt-9","prompt":"a"}`, 404, "model", `the model "gpt-9" does not exist`},
		{"no prompt", "/v1/completions", `{"max_tokens":3}`, 400, "prompt", "prompt is required"},
		{"empty prompt", "/v1/completions", `{"prompt":""}`, 400, "prompt", "prompt is empty"},
		{"batch of prompts", "/v1/completions", `{"prompt":["a","b"]}`, 400, "prompt", "a string or an array of token ids"},
		{"token outside vocabulary", "/v1/completions", `{"prompt":[1,5,512]}`, 400, "prompt", "prompt token 2 is 512"},
		{"prompt longer than the context", "/v1/completions", fmt.Sprintf(`{"prompt":%q}`, long), 400, "prompt", "the model's context is 256"},
		{"max_tokens 0", "/v1/completions", `{"prompt":"a","max_tokens":0}`, 400, "max_tokens", "max_tokens = 0"},
		{"max_tokens past the context", "/v1/completions", `{"prompt":"a","max_tokens":1000000}`, 400, "max_tokens", "context of 256"},
		{"max_tokens a string", "/v1/completions", `{"prompt":"a","max_tokens":"9"}`, 400, "max_tokens", "wrong type"},
		{"negative temperature", "/v1/completions", `{"prompt":"a","temperature":-1}`, 400, "temperature", "temperature = -1"},
		{"absurd temperature", "/v1/completions", `{"prompt":"a","temperature":1e300}`, 400, "temperature", "in [0, 2]"},
		{"top_p 0", "/v1/completions", `{"prompt":"a","top_p":0}`, 400, "top_p", "top_p = 0"},
		{"top_k -2", "/v1/completions", `{"prompt":"a","top_k":-2}`, 400, "top_k", "top_k = -2"},
		{"negative seed", "/v1/completions", `{"prompt":"a","seed":-5}`, 400, "seed", "seed = -5"},
		{"n 2", "/v1/completions", `{"prompt":"a","n":2}`, 400, "n", "one choice"},
		{"five stops", "/v1/completions", `{"prompt":"a","stop":["a","b","c","d","e"]}`, 400, "stop", "at most 4"},
		{"empty stop", "/v1/completions", `{"prompt":"a","stop":""}`, 400, "stop", "empty string"},
		{"stream options without stream", "/v1/completions", `{"prompt":"a","stream_options":{"include_usage":true}}`, 400, "stream_options", "only allowed with stream"},
		{"messages to completions", "/v1/completions", `{"prompt":"a","messages":[]}`, 400, "messages", "not messages"},
		{"no messages", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", "must not be empty"},
		{"unknown role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"x"}]}`, 400, "messages", `messages[0].role: role "wizard"`},
		{"no role", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"},{"content":"y"}]}`, 400, "messages[1].role", "has no role"},
		{"prompt to chat", "/v1/chat/completions", `{"prompt":"a","messages":[{"role":"user","content":"x"}]}`, 400, "prompt", "not a prompt"},
		{"no such path", "/v1/embeddings", `{}`, 404, "", "no such endpoint"},
		{"body too large", "/v1/completions", `{"prompt":"` + strings.Repeat("a", maxBodyBytes) + `"}`, 413, "", "over 8388608 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := ts.post(t, c.path, c.body)
			assert.Equal(t, c.status, code, string(body))
			var e struct{ Error apiError }
			require.NoError(t, json.Unmarshal(body, &e), string(body))
			assert.Equal(t, c.param, e.Error.Param)
			assert.Contains(t, e.Error.Message, c.msg)
		})
	}
	resp, err := http.Get(ts.URL + "/v1/completions")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	code, body := ts.post(t, "/v1/completions", `{"prompt":"still serving","max_tokens":2,"temperature":0}`)
	assert.Equal(t, http.StatusOK, code, string(body))
}

// hostileBodies makes n request bodies, seeded, each of which is not a
// valid request: prefixes of valid bodies (never valid JSON), fields set to
// wrong types or to values out of range, random bytes and invalid UTF-8,
// deep nesting, huge numbers, token ids outside the vocabulary and prompts
// longer than the context. Each comes with the path it goes to.
func hostileBodies(n int, seed uint64) (paths, bodies []string) {
	rng := rand.New(rand.NewPCG(seed, 0x686f7374))
	valid := []struct{ path, body string }{
		{"/v1/completions", `{"model":"tiny","prompt":"Once upon a time","max_tokens":8,"temperature":0.7,"top_p":0.9,"stop":["x"],"stream":true}`},
		{"/v1/completions", `{"prompt":[1,5,9,12],"max_tokens":4,"seed":3,"top_k":5}`},
		{"/v1/chat/completions", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":4}`},
	}
	bad := []struct{ field, value string }{
		{"max_tokens", `-1`}, {"max_tokens", `0`}, {"max_tokens", `1e9`}, {"max_tokens", `"8"`}, {"max_tokens", `[8]`},
		{"temperature", `-0.5`}, {"temperature", `1e308`}, {"temperature", `"hot"`}, {"top_p", `0`}, {"top_p", `1.5`},
		{"top_k", `-7`}, {"seed", `-1`}, {"seed", `1.5`}, {"n", `3`}, {"stop", `["a","b","c","d","e"]`}, {"stop", `""`},
		{"stop", `{"a":1}`}, {"model", `"other"`}, {"model", `7`}, {"prompt", `""`}, {"prompt", `[]`}, {"prompt", `[-1]`},
		{"prompt", `[99999]`}, {"prompt", `["a","b"]`}, {"prompt", `{"text":"a"}`}, {"prompt", `null`}, {"stream", `"yes"`},
		{"messages", `[]`}, {"messages", `[{"role":"wizard","content":"x"}]`}, {"messages", `[{"content":"x"}]`},
		{"messages", `"hello"`}, {"prompt", strconvQuote(strings.Repeat("word ", 400))},
		{"prompt", `[` + strings.TrimSuffix(strings.Repeat("7,", 300), ",") + `]`},
	}
	for range n {
		v := valid[rng.IntN(len(valid))]
		var body string
		switch k := rng.IntN(6); k {
		case 0: // a proper prefix of a valid body
			body = v.body[:rng.IntN(len(v.body))]
		case 1: // a field with a bad value, on the endpoint that reads it
			b := bad[rng.IntN(len(bad))]
			path := "/v1/completions"
			if b.field == "messages" {
				path = "/v1/chat/completions"
			}
			base := `{"prompt":"a",`
			if path != "/v1/completions" {
				base = `{"messages":[{"role":"user","content":"a"}],`
			}
			if b.field == "prompt" || b.field == "messages" {
				base = "{"
			}
			paths, bodies = append(paths, path), append(bodies, base+`"`+b.field+`":`+b.value+`}`)
			continue
		case 2: // random bytes, mostly not JSON and often not UTF-8
			buf := make([]byte, 1+rng.IntN(64))
			for i := range buf {
				buf[i] = byte(rng.IntN(256))
			}
			buf[0] = '{' // never a valid object: the rest is random
			buf = append(buf, 0xff)
			body = string(buf)
		case 3: // deep nesting
			d := 1000 + rng.IntN(100000)
			body = `{"prompt":` + strings.Repeat("[", d) + strings.Repeat("]", d) + `}`
		case 4: // a valid body with a byte of invalid UTF-8 spliced in
			i := rng.IntN(len(v.body))
			body = v.body[:i] + "\xc3\x28" + v.body[i:]
		case 5: // trailing garbage after a valid body
			body = v.body + []string{"{}", " x", "]", `"`, "\x00"}[rng.IntN(5)]
		}
		paths, bodies = append(paths, v.path), append(bodies, body)
	}
	return paths, bodies
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestHostileRequests sends a thousand invalid requests, many at once:
// each is answered with a 4xx and a JSON error, none starts a sequence,
// and the server serves a good request after them.
func TestHostileRequests(t *testing.T) {
	ts := newTestServer(t, Options{MaxBatch: 4, ChunkTokens: 16, Blocks: 64, BlockSize: 8, MaxQueue: 8})
	paths, bodies := hostileBodies(1000, 1)
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 16)
		fail atomic.Int64
	)
	for i := range bodies {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			resp, err := http.Post(ts.URL+paths[i], "application/json", strings.NewReader(bodies[i]))
			if !assert.NoError(t, err) {
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			assert.NoError(t, err)
			var e struct{ Error apiError }
			if !assert.True(t, resp.StatusCode >= 400 && resp.StatusCode < 500, "body %d %q: status %d", i, bodies[i], resp.StatusCode) ||
				!assert.NoError(t, json.Unmarshal(b, &e), "body %d %q: %s", i, bodies[i], b) ||
				!assert.NotEmpty(t, e.Error.Message, "body %d", i) {
				fail.Add(1)
			}
		})
	}
	wg.Wait()
	require.Zero(t, fail.Load())
	s := ts.e.Stats().Snapshot()
	assert.Zero(t, s.Running)
	assert.Zero(t, s.BlocksUsed)
	code, body := ts.post(t, "/v1/completions", `{"prompt":"still serving","max_tokens":2,"temperature":0}`)
	assert.Equal(t, http.StatusOK, code, string(body))
}

// TestDisconnects closes a hundred streams after their first chunk: every
// sequence is freed at once, and the server serves on.
func TestDisconnects(t *testing.T) {
	const clients = 100
	ts := newTestServer(t, Options{MaxBatch: 8, ChunkTokens: 16, Blocks: 256, BlockSize: 8, MaxQueue: 128})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := fmt.Sprintf(`{"prompt":"client %d","max_tokens":200,"stream":true,"ignore_eos":true}`, i)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/completions", strings.NewReader(body))
			if !assert.NoError(t, err) {
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if !assert.NoError(t, err) {
				return
			}
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			assert.NoError(t, err)
			assert.True(t, strings.HasPrefix(line, "data: {"), line)
			cancel()
			resp.Body.Close()
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		s := ts.e.Stats().Snapshot()
		return s.BlocksUsed == 0 && s.Running == 0 && s.Finished["abort"] == clients
	}, 10*time.Second, 20*time.Millisecond, "%+v", ts.e.Stats().Snapshot())
	code, _ := ts.post(t, "/v1/completions", `{"prompt":"after","max_tokens":2}`)
	assert.Equal(t, http.StatusOK, code)
}

func TestModelsHealthMetrics(t *testing.T) {
	ts := newTestServer(t, Options{MaxBatch: 2, ChunkTokens: 16, Blocks: 40, BlockSize: 8, MaxQueue: 8})
	get := func(path string) (int, string) {
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("/v1/models")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, `"id":"tiny"`)
	code, body = get("/health")
	assert.Equal(t, 200, code)
	assert.JSONEq(t, `{"status":"ok"}`, body)
	c, _ := ts.post(t, "/v1/completions", `{"prompt":"count me","max_tokens":3,"ignore_eos":true}`)
	require.Equal(t, 200, c)
	runtime.GC() // so that the heap live at the last collection is known
	code, body = get("/metrics")
	assert.Equal(t, 200, code)
	for _, want := range []string{
		`zbench_requests_total{model="tiny",finish="length"} 1`,
		`zbench_generated_tokens_total{model="tiny"} 3`,
		`zbench_kv_blocks_total{model="tiny"} 40`,
		`zbench_time_to_first_token_seconds_count{model="tiny"} 1`,
		`zbench_time_per_output_token_seconds_bucket{model="tiny",le="+Inf"} 1`,
		"# TYPE zbench_queue_depth gauge",
		"# TYPE process_resident_memory_bytes gauge",
	} {
		assert.Contains(t, body, want)
	}
	for _, name := range []string{"process_resident_memory_bytes", "go_memstats_heap_inuse_bytes", "go_gc_heap_live_bytes", "go_goroutines"} {
		m := regexp.MustCompile(`(?m)^` + name + ` ([0-9]+)$`).FindStringSubmatch(body)
		if assert.NotNil(t, m, name) {
			v, err := strconv.ParseInt(m[1], 10, 64)
			assert.NoError(t, err)
			assert.Positive(t, v, name)
		}
	}
}

// FuzzParseRequest checks that any body is a job or an error of status
// 4xx, never a panic, and that a job's fields are within their limits.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","prompt":"hi","max_tokens":4,"temperature":0.5,"top_p":0.9,"stop":["x"],"stream":true}`), false)
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}],"seed":3,"top_k":-1}`), true)
	f.Add([]byte(`{"prompt":[1,2,3],"max_tokens":1}`), false)
	tmpl, err := chat.Compile(chat.Plain, "<s>", "</s>")
	require.NoError(f, err)
	p := prompter{tok: byteEncoder{}, chat: tmpl}
	f.Fuzz(func(t *testing.T, body []byte, isChat bool) {
		j, err := parseRequest(body, isChat, "m", 64, 256, p)
		if err != nil {
			require.Nil(t, j)
			require.True(t, err.status >= 400 && err.status < 500, "%d", err.status)
			require.NotEmpty(t, err.Message)
			return
		}
		require.NotEmpty(t, j.Prompt)
		require.GreaterOrEqual(t, j.MaxTokens, 1)
		require.LessOrEqual(t, len(j.Prompt)+j.MaxTokens, 64)
		require.NoError(t, j.Sampling.Validate())
		require.LessOrEqual(t, len(j.stop), maxStops)
	})
}

// byteEncoder encodes text as its bytes after a BOS: a tokenizer for the
// fuzz target.
type byteEncoder struct{}

func (byteEncoder) Encode(text string, _ bool) []int {
	ids := []int{1}
	for _, b := range []byte(text) {
		ids = append(ids, int(b))
	}
	return ids
}
