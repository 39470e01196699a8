package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// A Client sends requests to a server's OpenAI completions API.
type Client struct {
	// BaseURL is the server's root, e.g. http://127.0.0.1:8080 (the
	// API's paths, /v1/…, are appended).
	BaseURL string
	// Model is the "model" of every request.
	Model string
	// Chat sends /v1/chat/completions with the prompt as one user
	// message, instead of /v1/completions.
	Chat bool
	// StopAtEOS lets the model stop before OutputTokens; by default each
	// request asks the server to ignore its end-of-sequence token
	// ("ignore_eos"), so that output lengths are the dataset's.
	StopAtEOS bool
	// HTTP is the client requests go through (one over Transport when
	// nil).
	HTTP *http.Client
}

// Transport is http.DefaultTransport's settings keeping as many idle
// connections to a server as a load keeps requests in flight, so that a
// request reuses a connection instead of waiting for a new one (the
// default keeps two).
var Transport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 1024
	return t
}()

var defaultClient = &http.Client{Transport: Transport}

// client is the HTTP client requests go through.
func (c *Client) client() *http.Client {
	if c.HTTP == nil {
		return defaultClient
	}
	return c.HTTP
}

// A Result is one request's outcome and timings.
type Result struct {
	Start        time.Time       // when the request was sent
	TTFT         time.Duration   // to the first output text
	E2E          time.Duration   // to the end of the response
	ITL          []time.Duration // between successive chunks of output text
	OutputTokens int             // the server's usage count, else the chunks of text
	Text         string          // the output text, the chunks joined
	Err          error
}

// TPOT is the time per output token after the first: (E2E − TTFT) /
// (OutputTokens − 1), 0 for fewer than two tokens.
func (r Result) TPOT() time.Duration {
	if r.OutputTokens < 2 {
		return 0
	}
	return (r.E2E - r.TTFT) / time.Duration(r.OutputTokens-1)
}

// chunk is the part of a streamed completion chunk the client reads.
type chunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *apiError `json:"error"`
}

// apiError is an API error object.
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// ErrServer marks a request the server refused or failed.
var ErrServer = errors.New("server error")

// Do sends it as a streamed request and times its response.
func (c *Client) Do(ctx context.Context, it Item) Result {
	body := map[string]any{"model": c.Model, "max_tokens": it.OutputTokens, "stream": true,
		"temperature": 0, "stream_options": map[string]any{"include_usage": true}}
	if !c.StopAtEOS {
		body["ignore_eos"] = true
	}
	path := "/v1/completions"
	if c.Chat {
		path = "/v1/chat/completions"
		body["messages"] = []map[string]string{{"role": "user", "content": it.Prompt}}
	} else {
		body["prompt"] = it.Prompt
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return Result{Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.BaseURL, "/")+path, bytes.NewReader(payload))
	if err != nil {
		return Result{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	r := Result{Start: time.Now()}
	resp, err := c.client().Do(req)
	if err != nil {
		r.Err = err
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var e struct {
			Error apiError `json:"error"`
		}
		text := strings.TrimSpace(string(msg))
		if json.Unmarshal(msg, &e) == nil && e.Error.Message != "" {
			text = e.Error.Message
		}
		r.Err = fmt.Errorf("%w: %s: %s", ErrServer, resp.Status, text)
		return r
	}
	r.Err = r.read(resp.Body)
	r.E2E = time.Since(r.Start)
	return r
}

// read consumes a response stream, recording the times of its chunks of
// output text and the token count.
func (r *Result) read(body io.Reader) error {
	events := newSSEReader(body)
	chunks, last, usage, done := 0, time.Time{}, -1, false
	var out strings.Builder
	defer func() { r.Text = out.String() }()
	for {
		data, err := events.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if string(data) == "[DONE]" {
			done = true
			break
		}
		var ch chunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return fmt.Errorf("%w: chunk %q: %w", ErrStream, truncate(data), err)
		}
		if ch.Error != nil {
			return fmt.Errorf("%w: in the stream: %s", ErrServer, ch.Error.Message)
		}
		if ch.Usage != nil {
			usage = ch.Usage.CompletionTokens
		}
		before := out.Len()
		for _, c := range ch.Choices {
			out.WriteString(c.Text)
			out.WriteString(c.Delta.Content)
		}
		if out.Len() == before {
			continue
		}
		now := time.Now()
		if chunks == 0 {
			r.TTFT = now.Sub(r.Start)
		} else {
			r.ITL = append(r.ITL, now.Sub(last))
		}
		chunks, last = chunks+1, now
	}
	if !done {
		return fmt.Errorf("%w: the stream ended without [DONE]", ErrStream)
	}
	if chunks == 0 {
		return fmt.Errorf("%w: no output text", ErrStream)
	}
	r.OutputTokens = chunks
	if usage > 0 {
		r.OutputTokens = usage
	}
	return nil
}

// truncate shortens a chunk for an error message.
func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// Models returns the ids the server lists at GET /v1/models.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.BaseURL, "/")+"/v1/models", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET /v1/models: %s", ErrServer, resp.Status)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("%w: GET /v1/models: %w", ErrServer, err)
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids, nil
}
