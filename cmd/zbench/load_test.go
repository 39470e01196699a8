package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"
)

// apiDouble answers GET /v1/models with one model and streams max_tokens
// chunks of text for POST /v1/completions, recording the models asked for.
func apiDouble(t *testing.T, models *[]string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"tiny","object":"model"}]}`)
			return
		}
		var body struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.URL.Path != "/v1/completions" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		*models = append(*models, body.Model)
		for range body.MaxTokens {
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"x\"}]}\n\n")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
}

func TestLoad(t *testing.T) {
	var models []string
	srv := apiDouble(t, &models)
	defer srv.Close()
	dir := t.TempDir()
	data := filepath.Join(dir, "d.jsonl")
	require.NoError(t, os.WriteFile(data, []byte("{\"prompt\":\"a b\",\"output_tokens\":3}\n{\"prompt\":\"c\",\"output_tokens\":2}\n"), 0o644))
	for _, c := range []struct {
		args  []string
		names []string
	}{
		{[]string{"--scenario", "singlestream", "--requests", "3", "--prompt-words", "4", "--output-tokens", "2"},
			[]string{"BenchmarkLoad/scenario=singlestream"}},
		{[]string{"--scenario", "offline", "--concurrency", "2", "--requests", "4", "--dataset", data, "--model", "m"},
			[]string{"BenchmarkLoad/scenario=offline/concurrency=2"}},
		{[]string{"--rate", "50", "--requests", "5"}, []string{"BenchmarkLoad/scenario=server/rate=50"}},
		{[]string{"--sweep", "20,40", "--requests", "3", "--name", "BenchmarkServe"},
			[]string{"BenchmarkServe/scenario=server/rate=20", "BenchmarkServe/scenario=server/rate=40"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			models = nil
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
				}
			}
			require.NoError(t, r.Err())
			assert.Equal(t, c.names, names)
			assert.Contains(t, stderr.String(), "PASS")
			want := "tiny"
			if strings.Contains(strings.Join(c.args, " "), "--model m") {
				want = "m"
			}
			assert.Equal(t, want, models[0])
		})
	}
}

func TestLoadErrors(t *testing.T) {
	var models []string
	srv := apiDouble(t, &models)
	defer srv.Close()
	for _, c := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{"--scenario", "burst"}, `unknown scenario "burst"`, true},
		{[]string{"--requests", "0"}, "--requests 0", true},
		{[]string{"--rate", "-1"}, "--rate -1", true},
		{[]string{"--scenario", "offline", "--sweep", "1,2"}, "--sweep runs the server scenario", true},
		{[]string{"--sweep", "1,x"}, `--sweep "1,x"`, true},
		{[]string{"--prompt-words", "9:3"}, "--prompt-words", true},
		{[]string{"--dataset", "/nonexistent.jsonl"}, "/nonexistent.jsonl", false},
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
