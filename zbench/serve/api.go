package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"unicode/utf8"

	"github.com/zbench/zbench/models/chat"
	"github.com/zbench/zbench/models/llama"
)

// An apiError is an error answer of the API: its HTTP status and the
// OpenAI error object, param naming the field at fault.
type apiError struct {
	status  int
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// maxBodyBytes bounds a request's body.
const maxBodyBytes = 8 << 20

// chatMessage is one message of a chat completion request.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// completionRequest is the body of POST /v1/completions and
// /v1/chat/completions: the fields the server reads (others are
// ignored, as OpenAI-compatible servers do).
type completionRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	RepetitionPenalty   *float64        `json:"repetition_penalty"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	IgnoreEOS bool `json:"ignore_eos"`
}

// A job is a parsed request: the engine's request, and what the answer
// needs.
type job struct {
	Request
	chat, stream, usage bool
	stop                []string
}

// encoder turns a prompt's text into token ids (the tokenizer's, with
// its special tokens).
type encoder interface {
	Encode(text string, addSpecial bool) []int
}

// A prompter turns a request's prompt or messages into token ids.
type prompter struct {
	tok encoder
	// chat lays out messages.
	chat *chat.Template
}

// parseRequest reads and checks a request body for the model named model
// with a context of ctx tokens and a vocabulary of vocab, its prompt
// made by p.
func parseRequest(body []byte, isChat bool, model string, ctx, vocab int, p prompter) (*job, *apiError) {
	if !utf8.Valid(body) {
		return nil, badRequest("", "the request body is not valid UTF-8")
	}
	var r completionRequest
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&r); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, badRequest(te.Field, "%q has the wrong type: %s, want %s", te.Field, te.Value, te.Type)
		}
		return nil, badRequest("", "malformed JSON: %v", err)
	}
	if rest := bytes.TrimSpace(body[d.InputOffset():]); len(rest) > 0 {
		return nil, badRequest("", "malformed JSON: more than one value in the body, or bytes after it")
	}
	if r.Model != "" && r.Model != model {
		return nil, &apiError{status: http.StatusNotFound, Type: "invalid_request_error", Param: "model",
			Message: fmt.Sprintf("the model %q does not exist: this server serves %q", r.Model, model)}
	}
	j := &job{Request: Request{IgnoreEOS: r.IgnoreEOS}, chat: isChat, stream: r.Stream}
	if r.StreamOptions != nil {
		if !r.Stream {
			return nil, badRequest("stream_options", "stream_options is only allowed with stream")
		}
		j.usage = r.StreamOptions.IncludeUsage
	}
	if r.N != nil && *r.N != 1 {
		return nil, badRequest("n", "n = %d: this server generates one choice a request", *r.N)
	}
	var err *apiError
	if isChat {
		if len(r.Prompt) > 0 {
			return nil, badRequest("prompt", "a chat completion takes messages, not a prompt")
		}
		j.Prompt, err = p.chatPrompt(r.Messages)
	} else {
		if r.Messages != nil {
			return nil, badRequest("messages", "a completion takes a prompt, not messages")
		}
		j.Prompt, err = textPrompt(r.Prompt, vocab, p.tok)
	}
	if err != nil {
		return nil, err
	}
	if len(j.Prompt) >= ctx {
		return nil, badRequest("prompt", "the prompt is %d tokens, the model's context is %d", len(j.Prompt), ctx)
	}
	limit, param := r.MaxTokens, "max_tokens"
	if r.MaxCompletionTokens != nil {
		limit, param = r.MaxCompletionTokens, "max_completion_tokens"
	}
	switch {
	case limit != nil:
		j.MaxTokens = *limit
	case isChat:
		j.MaxTokens = ctx - len(j.Prompt)
	default:
		j.MaxTokens = 16 // OpenAI's default
	}
	if j.MaxTokens < 1 || len(j.Prompt)+j.MaxTokens > ctx {
		return nil, badRequest(param, "%s = %d: want at least 1, and the prompt's %d tokens and it within the model's context of %d",
			param, j.MaxTokens, len(j.Prompt), ctx)
	}
	if j.Sampling, err = sampling(&r); err != nil {
		return nil, err
	}
	if j.stop, err = stopStrings(r.Stop); err != nil {
		return nil, err
	}
	return j, nil
}

// sampling reads the sampling parameters, OpenAI's defaults where absent
// (temperature 1, top_p 1).
func sampling(r *completionRequest) (llama.Sampling, *apiError) {
	s := llama.Sampling{Temperature: 1}
	if r.Temperature != nil {
		if t := *r.Temperature; !(t >= 0 && t <= 2) {
			return s, badRequest("temperature", "temperature = %g: want it in [0, 2]", t)
		}
		s.Temperature = *r.Temperature
	}
	if r.TopP != nil {
		if p := *r.TopP; !(p > 0 && p <= 1) {
			return s, badRequest("top_p", "top_p = %g: want it in (0, 1]", p)
		}
		s.TopP = *r.TopP
	}
	if r.TopK != nil {
		switch k := *r.TopK; {
		case k == -1: // off, as vLLM spells it
		case k < 0:
			return s, badRequest("top_k", "top_k = %d: want 0 or more (0 or -1: off)", k)
		default:
			s.TopK = k
		}
	}
	if r.RepetitionPenalty != nil {
		if p := *r.RepetitionPenalty; !(p > 0) || math.IsInf(p, 0) {
			return s, badRequest("repetition_penalty", "repetition_penalty = %g: want it above 0 (1: off)", p)
		}
		s.RepetitionPenalty = *r.RepetitionPenalty
	}
	if r.Seed != nil {
		if *r.Seed < 0 {
			return s, badRequest("seed", "seed = %d: want 0 or more", *r.Seed)
		}
		s.Seed = uint64(*r.Seed)
	}
	return s, nil
}

// textPrompt reads a completion's prompt: a string, or an array of token
// ids.
func textPrompt(raw json.RawMessage, vocab int, tok encoder) ([]int, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("prompt", "prompt is required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if text == "" {
			return nil, badRequest("prompt", "prompt is empty")
		}
		return tok.Encode(text, true), nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, badRequest("prompt", "prompt must be a string or an array of token ids (one prompt a request)")
	}
	if len(ids) == 0 {
		return nil, badRequest("prompt", "prompt is empty")
	}
	for i, id := range ids {
		if id < 0 || id >= vocab {
			return nil, badRequest("prompt", "prompt token %d is %d, outside the vocabulary [0, %d)", i, id, vocab)
		}
	}
	return ids, nil
}

// chatPrompt lays out msgs with the chat template and encodes the text
// without adding special tokens (the template places them), as
// transformers' apply_chat_template does.
func (p prompter) chatPrompt(msgs []chatMessage) ([]int, *apiError) {
	if len(msgs) == 0 {
		return nil, badRequest("messages", "messages is required and must not be empty")
	}
	turns := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		if m.Role == "" {
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d] has no role", i)
		}
		turns[i] = chat.Message{Role: m.Role, Content: m.Content}
	}
	text, err := p.chat.Render(turns)
	if err != nil {
		return nil, badRequest("messages", "%v", err)
	}
	return p.tok.Encode(text, false), nil
}

// maxStops is the most stop strings a request may give, as OpenAI's API.
const maxStops = 4

// stopStrings reads stop: absent, a string, or up to four strings.
func stopStrings(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, badRequest("stop", "stop is an empty string")
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "stop must be a string or an array of strings")
	}
	if len(many) > maxStops {
		return nil, badRequest("stop", "stop has %d strings, at most %d", len(many), maxStops)
	}
	for i, s := range many {
		if s == "" {
			return nil, badRequest("stop", "stop[%d] is an empty string", i)
		}
	}
	return many, nil
}
