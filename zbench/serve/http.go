package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/zbench/zbench/models/chat"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/tokenizer"
)

// A Server is the HTTP front of an engine: the OpenAI completions API
// (POST /v1/completions and /v1/chat/completions, streamed as server-sent
// events with "stream": true), GET /v1/models, GET /health and GET
// /metrics (Prometheus' text format).
type Server struct {
	e       *Engine
	tok     *tokenizer.Tokenizer
	prompts prompter
	model   string
	created int64
	ids     atomic.Int64
	closing atomic.Bool
}

// NewServer serves e's model under the name model, with tok its
// tokenizer; chat completions are laid out in tok's chat template, or
// chat.Plain when its files give none.
func NewServer(e *Engine, tok *tokenizer.Tokenizer, model string) (*Server, error) {
	tmpl, err := chat.For(tok)
	if err != nil {
		return nil, err
	}
	return &Server{e: e, tok: tok, prompts: prompter{tok: tok, chat: tmpl}, model: model, created: time.Now().Unix()}, nil
}

// Closing makes /health answer 503 and new completions be refused, while
// those running finish.
func (s *Server) Closing() { s.closing.Store(true) }

// Handler routes the API's paths.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, false) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, true) })
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /metrics", s.metrics)
	methods := map[string]string{"/v1/completions": "POST", "/v1/chat/completions": "POST", "/v1/models": "GET",
		"/health": "GET", "/metrics": "GET"}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if m, ok := methods[r.URL.Path]; ok {
			w.Header().Set("Allow", m)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
				Message: fmt.Sprintf("%s takes %s, not %s", r.URL.Path, m, r.Method)})
			return
		}
		writeError(w, &apiError{status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, map[string]any{"error": e})
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{
		{"id": s.model, "object": "model", "created": s.created, "owned_by": "zbench"}}})
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	if s.closing.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_ = s.e.Stats().WritePrometheus(w, s.model)
}

// complete answers a completion or chat completion request.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	if s.closing.Load() {
		writeError(w, &apiError{status: http.StatusServiceUnavailable, Type: "server_error", Message: ErrStopped.Error()})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
			Message: fmt.Sprintf("the request body is over %d bytes", maxBodyBytes)})
		return
	}
	j, apiErr := parseRequest(body, chat, s.model, s.e.Context(), s.e.m.Config.VocabSize, s.prompts)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events, err := s.e.Submit(ctx, j.Request)
	if err != nil {
		writeError(w, submitError(err))
		return
	}
	a := &answer{s: s, j: j, w: w, id: fmt.Sprintf("cmpl-%d", s.ids.Add(1)), created: time.Now().Unix(),
		stream: s.tok.NewStream(), cancel: cancel}
	a.run(r, events)
}

// submitError is the API's answer to an error of Submit.
func submitError(err error) *apiError {
	switch {
	case errors.Is(err, ErrQueueFull):
		return &apiError{status: http.StatusTooManyRequests, Type: "rate_limit_error", Message: err.Error()}
	case errors.Is(err, ErrStopped):
		return &apiError{status: http.StatusServiceUnavailable, Type: "server_error", Message: err.Error()}
	case errors.Is(err, ErrTooLong):
		return badRequest("max_tokens", "%v", err)
	case errors.Is(err, llama.ErrInput):
		return badRequest("", "%v", err)
	}
	return &apiError{status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}
