package main

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/tokenizer"
	"github.com/zbench/zbench/zbench/serve"
)

// TestServeGraceful serves the tiny golden checkpoint, starts a streamed
// request, then stops the server as SIGTERM does: /health turns 503, a new
// request is refused, the running one finishes whole, and the server
// returns.
func TestServeGraceful(t *testing.T) {
	cfg, err := llama.LoadConfig(filepath.Join(llamaTiny, "config.json"))
	require.NoError(t, err)
	ck, err := llama.OpenCheckpoint(filepath.Join(llamaTiny, "model.safetensors"))
	require.NoError(t, err)
	m, err := llama.Load(cpu.New(), cfg, ck, nn.F32)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	tok, err := tokenizer.Load(llamaTiny)
	require.NoError(t, err)
	e, err := serve.NewEngine(m, serve.Options{MaxBatch: 4, ChunkTokens: 32, Blocks: 64, BlockSize: 16, MaxQueue: 8})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	s, err := serve.NewServer(e, tok, "tiny")
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveUntil(ctx, e, s, ln, 30*time.Second) }()

	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"Once upon","max_tokens":200,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"temperature":0}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(first, "data: {"), first)
	stop() // SIGTERM
	require.Eventually(t, func() bool {
		h, err := http.Get(url + "/health")
		if err != nil {
			return true // already closed to new connections
		}
		h.Body.Close()
		return h.StatusCode == http.StatusServiceUnavailable
	}, 5*time.Second, 5*time.Millisecond)
	var rest bytes.Buffer
	_, err = rest.ReadFrom(r)
	require.NoError(t, err)
	assert.Contains(t, rest.String(), `"completion_tokens":200`, "the running request finished whole")
	assert.Contains(t, rest.String(), `"finish_reason":"length"`)
	assert.True(t, strings.HasSuffix(rest.String(), "data: [DONE]\n\n"))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop")
	}
	_, err = http.Get(url + "/health")
	assert.Error(t, err, "not listening any more")
}

func TestServeErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "missing required flag --model"},
		{[]string{"--model", "x", "--dtype", "f64"}, `unknown --dtype "f64"`},
		{[]string{"--model", "x", "--max-batch", "0"}, "want at least 1"},
		{[]string{"--model", syntheticTinyLlama}, "needs --tokenizer"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(append([]string{"serve"}, c.args...), &stdout, &stderr)
		require.Error(t, err)
		assert.Contains(t, err.Error(), c.want)
	}
	assert.Equal(t, "TinyLlama-1.1B", modelName("/models/TinyLlama-1.1B/"))
	assert.Equal(t, "q4", modelName("dir/q4.gguf"))
}
