package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zbench/zbench/models/tokenizer"
	"golang.org/x/perf/benchfmt"
)

// apiRequest is a completion request apiDouble answered.
type apiRequest struct {
	Model     string `json:"model"`
	Prompt    string `json:"prompt"`
	MaxTokens int    `json:"max_tokens"`
}

// apiDouble is a test double of an OpenAI completions server: it answers
// GET /v1/models with one model and streams max_tokens chunks of text for
// POST /v1/completions, recording the requests.
type apiDouble struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []apiRequest
}

func newAPIDouble(t *testing.T) *apiDouble {
	d := &apiDouble{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"tiny","object":"model"}]}`)
			return
		}
		var body apiRequest
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.URL.Path != "/v1/completions" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		d.reqs = append(d.reqs, body)
		d.mu.Unlock()
		for range body.MaxTokens {
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"x\"}]}\n\n")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(d.Close)
	return d
}

// take returns the requests answered since it was last called.
func (d *apiDouble) take() []apiRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	reqs := d.reqs
	d.reqs = nil
	return reqs
}

// sharegptSmall is the ShareGPT file the loadgen package ships for its
// tests.
const sharegptSmall = "../../zbench/loadgen/testdata/sharegpt-small.json"

func TestLoad(t *testing.T) {
	srv := newAPIDouble(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "d.jsonl")
	require.NoError(t, os.WriteFile(data, []byte("{\"prompt\":\"a b\",\"output_tokens\":3}\n{\"prompt\":\"c\",\"output_tokens\":2}\n"), 0o644))
	for _, c := range []struct {
		args    []string
		names   []string
		dataset string
	}{
		{[]string{"--scenario", "singlestream", "--requests", "3", "--prompt-words", "4", "--output-tokens", "2"},
			[]string{"BenchmarkLoad/scenario=singlestream"}, "synthetic prompt-words=4 output-tokens=2"},
		{[]string{"--scenario", "offline", "--concurrency", "2", "--requests", "4", "--dataset", data, "--model", "m"},
			[]string{"BenchmarkLoad/scenario=offline/concurrency=2"}, data + " format=jsonl requests=2"},
		{[]string{"--scenario", "offline", "--requests", "6", "--dataset", sharegptSmall, "--tokenizer", llamaTiny},
			[]string{"BenchmarkLoad/scenario=offline"}, sharegptSmall + " format=sharegpt conversations=30 requests=6 tokenizer=" + llamaTiny},
		{[]string{"--rate", "50", "--requests", "5"}, []string{"BenchmarkLoad/scenario=server/rate=50"}, "synthetic prompt-words=32:256 output-tokens=16:128"},
		{[]string{"--rate", "100", "--requests", "2", "--min-duration", "200ms"}, []string{"BenchmarkLoad/scenario=server/rate=100"}, "synthetic prompt-words=32:256 output-tokens=16:128"},
		{[]string{"--sweep", "20,40", "--requests", "3", "--name", "BenchmarkServe"},
			[]string{"BenchmarkServe/scenario=server/rate=20", "BenchmarkServe/scenario=server/rate=40"}, "synthetic prompt-words=32:256 output-tokens=16:128"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			srv.take()
			var stdout, stderr bytes.Buffer
			require.NoError(t, run(append([]string{"load", "--url", srv.URL}, c.args...), &stdout, &stderr), stderr.String())
			r := benchfmt.NewReader(&stdout, "out")
			var names []string
			for r.Scan() {
				if res, ok := r.Result().(*benchfmt.Result); ok {
					names = append(names, "Benchmark"+string(res.Name.Full()))
					v, ok := res.Value("pass")
					require.True(t, ok)
					assert.Equal(t, 1.0, v)
					assert.Equal(t, "/v1/completions", res.GetConfig("loadgen-api"))
					assert.Equal(t, c.dataset, res.GetConfig("loadgen-dataset"))
					if slices.Contains(c.args, "--min-duration") {
						assert.Equal(t, "200ms", res.GetConfig("loadgen-min-duration"))
						assert.Greater(t, res.Iters, 10, "sent on past --requests for 200 ms at 100/s")
					}
				}
			}
			require.NoError(t, r.Err())
			assert.Equal(t, c.names, names)
			assert.Contains(t, stderr.String(), "PASS")
			want := "tiny"
			if strings.Contains(strings.Join(c.args, " "), "--model m") {
				want = "m"
			}
			assert.Equal(t, want, srv.take()[0].Model)
		})
	}
}

// TestLoadShareGPT sends the shipped ShareGPT file with the tiny
// checkpoint's tokenizer and checks the requests against the file decoded
// whole and the tokenizer called directly: each prompt a conversation's
// first human turn answered by gpt, asking for that reply's token count,
// both within vLLM's limits; as many distinct as --requests or as there
// are, in an order the seed decides; the file found ShareGPT by its
// content when its name says nothing.
func TestLoadShareGPT(t *testing.T) {
	tok, err := tokenizer.Load(llamaTiny)
	require.NoError(t, err)
	data, err := os.ReadFile(sharegptSmall)
	require.NoError(t, err)
	var file []struct {
		Conversations []struct{ From, Value string }
	}
	require.NoError(t, json.Unmarshal(data, &file))
	want := map[string]int{}
	for _, e := range file {
		c := e.Conversations
		i := slices.IndexFunc(c, func(t struct{ From, Value string }) bool { return t.From == "human" })
		if i < 0 || i+1 == len(c) || c[i+1].From != "gpt" {
			continue
		}
		p, o := len(tok.Encode(c[i].Value, true)), len(tok.Encode(c[i+1].Value, true))
		if p >= 4 && o >= 4 && p <= 1024 && p+o <= 2048 {
			want[c[i].Value] = o
		}
	}
	require.Greater(t, len(want), 10)
	require.Less(t, len(want), 25, "the tokenizer's limits leave some out")

	noExt := filepath.Join(t.TempDir(), "conversations")
	require.NoError(t, os.WriteFile(noExt, append([]byte(" \n"), data...), 0o644))
	srv := newAPIDouble(t)
	send := func(path, requests, seed string) []apiRequest {
		t.Helper()
		var stdout, stderr bytes.Buffer
		require.NoError(t, run([]string{"load", "--url", srv.URL, "--scenario", "singlestream", "--dataset", path,
			"--tokenizer", llamaTiny, "--requests", requests, "--seed", seed}, &stdout, &stderr), stderr.String())
		assert.Contains(t, stdout.String(), fmt.Sprintf("loadgen-dataset: %s format=sharegpt conversations=30 requests=%d tokenizer=%s\n",
			path, min(len(want), atoi(t, requests)), llamaTiny))
		reqs := srv.take()
		for _, r := range reqs {
			o, ok := want[r.Prompt]
			require.True(t, ok, "prompt %q", r.Prompt)
			assert.Equal(t, o, r.MaxTokens, "max_tokens of %q", r.Prompt)
		}
		return reqs
	}
	five := send(sharegptSmall, "5", "1")
	require.Len(t, five, 5)
	assert.Len(t, distinctPrompts(five), 5)
	assert.Equal(t, five, send(sharegptSmall, "5", "1"), "seeded")
	assert.Equal(t, five, send(noExt, "5", "1"), "told by the content")
	assert.NotEqual(t, five, send(sharegptSmall, "5", "2"))

	all := send(sharegptSmall, "40", "1")
	require.Len(t, all, 40)
	assert.Len(t, distinctPrompts(all), len(want), "every usable conversation")
	for i := len(want); i < len(all); i++ {
		assert.Equal(t, all[i-len(want)], all[i], "request %d: sent again from the first", i)
	}
	assert.Equal(t, five, all[:5], "five are the first of all")
}

func distinctPrompts(reqs []apiRequest) map[string]bool {
	m := map[string]bool{}
	for _, r := range reqs {
		m[r.Prompt] = true
	}
	return m
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

func TestLoadErrors(t *testing.T) {
	srv := newAPIDouble(t)
	dir := t.TempDir()
	jsonl, badShareGPT, jsonlAsJSON := filepath.Join(dir, "d.jsonl"), filepath.Join(dir, "bad"), filepath.Join(dir, "d.json")
	require.NoError(t, os.WriteFile(jsonl, []byte(`{"prompt":"a b","output_tokens":3}`), 0o644))
	require.NoError(t, os.WriteFile(jsonlAsJSON, []byte(`{"prompt":"a b","output_tokens":3}`), 0o644))
	require.NoError(t, os.WriteFile(badShareGPT, []byte(`[{"conversations":[]},{"conversations":[{"from":"human","value":"p"},{"from":"gpt"}]}]`), 0o644))
	for _, c := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{"--scenario", "burst"}, `unknown scenario "burst"`, true},
		{[]string{"--requests", "0"}, "--requests 0", true},
		{[]string{"--rate", "-1"}, "--rate -1", true},
		{[]string{"--min-duration", "-1s"}, "--min-duration -1s", true},
		{[]string{"--scenario", "offline", "--sweep", "1,2"}, "--sweep runs the server scenario", true},
		{[]string{"--sweep", "1,x"}, `--sweep "1,x"`, true},
		{[]string{"--prompt-words", "9:3"}, "--prompt-words", true},
		{[]string{"--dataset", "/nonexistent.jsonl"}, "/nonexistent.jsonl", false},
		{[]string{"--dataset", sharegptSmall}, "is ShareGPT, whose output lengths are counted in tokens: give the served model's --tokenizer", true},
		{[]string{"--dataset", sharegptSmall, "--tokenizer", "/nonexistent/tokenizer.json"}, "/nonexistent/tokenizer.json", false},
		{[]string{"--tokenizer", llamaTiny}, "--tokenizer counts the output tokens of a ShareGPT --dataset, and none is given", true},
		{[]string{"--dataset", jsonl, "--tokenizer", llamaTiny}, "is JSONL, whose requests give theirs", true},
		{[]string{"--dataset", badShareGPT, "--tokenizer", llamaTiny}, badShareGPT + `: entry 1: turn 1: bad dataset: no "value"`, false},
		{[]string{"--dataset", jsonlAsJSON, "--tokenizer", llamaTiny}, jsonlAsJSON + ": bad dataset: not a JSON array of conversations", false},
		{[]string{"--url", "http://127.0.0.1:1"}, "the server's models", false},
		{[]string{"--rate", "100", "--requests", "3", "--ttft-bound", "1ns"}, "server: FAIL", false},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			args := append([]string{"load", "--url", srv.URL}, c.args...)
			var stdout, stderr bytes.Buffer
			err := run(args, &stdout, &stderr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Equal(t, map[bool]int{true: 2, false: 1}[c.usage], exitCode(err))
		})
	}
}
