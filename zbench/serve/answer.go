package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/zbench/zbench/models/tokenizer"
)

// An answer writes one request's response as its tokens come: server-sent
// events of chunks, or one JSON object at the end; text that may begin a
// stop string is held back until it does not, and a stop string ends the
// request (cancel) with the text before it.
type answer struct {
	s       *Server
	j       *job
	w       http.ResponseWriter
	id      string
	created int64
	stream  *tokenizer.Stream
	cancel  context.CancelFunc
	text    strings.Builder // the whole text, when not streaming
	pending string          // text held back
	tokens  int
	role    bool // the chat stream's role chunk is sent
}

// run reads the request's events to their end and answers.
func (a *answer) run(r *http.Request, events <-chan Event) {
	if a.j.stream {
		h := a.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		a.w.WriteHeader(http.StatusOK)
	}
	finish, stopped := "", false
	var engineErr error
	for ev := range events {
		switch {
		case ev.Finish != "":
			if !stopped {
				finish, engineErr = ev.Finish, ev.Err
			}
		case !stopped:
			a.tokens++
			if a.push(a.stream.Push(ev.Token)) {
				finish, stopped = "stop", true
				a.cancel()
			}
		}
	}
	if !stopped {
		if a.push(a.stream.Flush()) {
			finish = "stop"
		} else {
			a.emit(a.pending)
			a.pending = ""
		}
	}
	if finish == "abort" {
		if r.Context().Err() != nil {
			return // the client has gone
		}
		msg := "the request was aborted"
		if engineErr != nil {
			msg = engineErr.Error()
		}
		e := &apiError{status: http.StatusInternalServerError, Type: "server_error", Message: msg}
		if a.j.stream {
			a.event(map[string]any{"error": e})
			a.event("[DONE]")
			return
		}
		writeError(a.w, e)
		return
	}
	usage := map[string]int{"prompt_tokens": len(a.j.Prompt), "completion_tokens": a.tokens, "total_tokens": len(a.j.Prompt) + a.tokens}
	if a.j.stream {
		a.event(a.chunk("", finish))
		if a.j.usage {
			c := a.chunk("", "")
			c["choices"], c["usage"] = []any{}, usage
			a.event(c)
		}
		a.event("[DONE]")
		return
	}
	choice := map[string]any{"index": 0, "finish_reason": finish}
	object := "text_completion"
	if a.j.chat {
		choice["message"] = map[string]string{"role": "assistant", "content": a.text.String()}
		object = "chat.completion"
	} else {
		choice["text"], choice["logprobs"] = a.text.String(), nil
	}
	writeJSON(a.w, http.StatusOK, map[string]any{"id": a.id, "object": object, "created": a.created,
		"model": a.s.model, "choices": []any{choice}, "usage": usage})
}

// push adds text to what is held back, sends what cannot begin a stop
// string, and reports whether a stop string appeared (the text before it
// sent, the rest dropped).
func (a *answer) push(text string) bool {
	a.pending += text
	for _, stop := range a.j.stop {
		if i := strings.Index(a.pending, stop); i >= 0 {
			a.emit(a.pending[:i])
			a.pending = ""
			return true
		}
	}
	hold := 0
	for _, stop := range a.j.stop {
		for n := min(len(stop)-1, len(a.pending)); n > hold; n-- {
			if strings.HasSuffix(a.pending, stop[:n]) {
				hold = n
				break
			}
		}
	}
	a.emit(a.pending[:len(a.pending)-hold])
	a.pending = a.pending[len(a.pending)-hold:]
	return false
}

// emit sends text: a chunk, or into the whole text.
func (a *answer) emit(text string) {
	if text == "" {
		return
	}
	if !a.j.stream {
		a.text.WriteString(text)
		return
	}
	a.event(a.chunk(text, ""))
}

// chunk is a stream chunk of text, or with finish, the last.
func (a *answer) chunk(text, finish string) map[string]any {
	var reason any
	if finish != "" {
		reason = finish
	}
	choice := map[string]any{"index": 0, "finish_reason": reason}
	object := "text_completion"
	if a.j.chat {
		object = "chat.completion.chunk"
		delta := map[string]string{}
		if text != "" || finish == "" {
			delta["content"] = text
		}
		if !a.role {
			delta["role"], a.role = "assistant", true
		}
		choice["delta"] = delta
	} else {
		choice["text"], choice["logprobs"] = text, nil
	}
	return map[string]any{"id": a.id, "object": object, "created": a.created, "model": a.s.model, "choices": []any{choice}}
}

// event writes one server-sent event and flushes it to the client.
func (a *answer) event(v any) {
	data := "[DONE]"
	if s, ok := v.(string); !ok || s != "[DONE]" {
		b, err := json.Marshal(v)
		if err != nil {
			return
		}
		data = string(b)
	}
	if _, err := fmt.Fprintf(a.w, "data: %s\n\n", data); err != nil {
		return
	}
	if f, ok := a.w.(http.Flusher); ok {
		f.Flush()
	}
}
