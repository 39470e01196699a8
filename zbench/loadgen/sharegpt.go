package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"unicode/utf8"
)

// Roles of the ShareGPT turns a request is made of.
const (
	// ShareGPTPrompt is the "from" of the turn that is a request's prompt.
	ShareGPTPrompt = "human"
	// ShareGPTReply is the "from" of the turn that gives a request's
	// output length.
	ShareGPTReply = "gpt"
)

// ShareGPTLimits bound the token counts of the exchanges
// [ShareGPT.Sample] takes, as is_valid_sequence bounds them in vLLM's
// benchmarks.
type ShareGPTLimits struct {
	// MinTokens is the fewest tokens of a prompt, and of a reply.
	MinTokens int
	// MaxPrompt is the most tokens of a prompt.
	MaxPrompt int
	// MaxTotal is the most tokens of a prompt and its reply together.
	MaxTotal int
}

// DefaultShareGPTLimits are vLLM's: prompts and replies of at least 4
// tokens, prompts of at most 1024, both together at most 2048.
var DefaultShareGPTLimits = ShareGPTLimits{MinTokens: 4, MaxPrompt: 1024, MaxTotal: 2048}

// check refuses limits that no exchange can meet, or that would ask for
// more output tokens than an Item may.
func (l ShareGPTLimits) check() error {
	if l.MinTokens < 1 || l.MaxPrompt < l.MinTokens || l.MaxTotal < 2*l.MinTokens || l.MaxTotal > maxOutputTokens {
		return fmt.Errorf("%w: ShareGPT limits %+v: want 1 ≤ MinTokens ≤ MaxPrompt and 2·MinTokens ≤ MaxTotal ≤ %d",
			ErrDataset, l, maxOutputTokens)
	}
	return nil
}

// valid reports whether a prompt of p tokens and a reply of o tokens are
// within the limits.
func (l ShareGPTLimits) valid(p, o int) bool {
	return p >= l.MinTokens && o >= l.MinTokens && p <= l.MaxPrompt && p+o <= l.MaxTotal
}

// An Exchange is one ShareGPT conversation's first human turn and the gpt
// turn right after it.
type Exchange struct {
	// Entry is the conversation's index in the file's array, from 0.
	Entry  int
	Prompt string
	Reply  string
}

// ShareGPT is a ShareGPT dataset as read: the exchanges its conversations
// give, and counts of those that give none.
type ShareGPT struct {
	// Name is the file's, for errors.
	Name string
	// Exchanges are the usable conversations' exchanges, in file order.
	Exchanges []Exchange
	// Conversations counts the entries of the file's array.
	Conversations int
	// Short counts the entries with fewer than two turns (or no
	// "conversations").
	Short int
	// Unanswered counts the entries of two turns or more whose first
	// human turn is missing or not followed by a gpt turn.
	Unanswered int
}

// sharegptEntry is one element of a ShareGPT file's array; fields other
// than "conversations" are ignored.
type sharegptEntry struct {
	Conversations *[]sharegptTurn `json:"conversations"`
}

// sharegptTurn is one turn of a conversation, its strings kept raw so that
// invalid UTF-8 is seen (the decoder would replace it) and the turns not
// used are never unquoted.
type sharegptTurn struct {
	From  json.RawMessage `json:"from"`
	Value json.RawMessage `json:"value"`
}

// ReadShareGPT reads a dataset in the ShareGPT format that vLLM's serving
// benchmark reads: a JSON array of objects, each with "conversations", an
// array of turns {"from": "human"|"gpt"|"system"|…, "value": "…"}; other
// fields are ignored. The array is decoded one entry at a time, and only
// each conversation's exchange is kept: its first human turn and the turn
// after it, when that is a gpt turn. Conversations with fewer than two
// turns, as in vLLM, or without such an exchange give none. (vLLM takes
// the first two turns whatever their roles; for conversations that open
// with a human turn answered by gpt, the usual case, the two agree.)
//
// A file that is not a JSON array, an entry or turn of the wrong JSON
// type, a turn without a "from" or "value" string, a string that is not
// valid UTF-8, or a file with no exchange at all is refused with
// ErrDataset; name (the file's) is in its errors, with the entry's index
// from 0.
func ReadShareGPT(r io.Reader, name string) (*ShareGPT, error) {
	d := &ShareGPT{Name: name}
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%s: %w: empty file", name, ErrDataset)
		}
		return nil, fmt.Errorf("%s: %w: not JSON: %w", name, ErrDataset, err)
	}
	if tok != json.Delim('[') {
		return nil, fmt.Errorf("%s: %w: not a JSON array of conversations (JSON Lines of prompts belong in a .jsonl file)", name, ErrDataset)
	}
	for i := 0; dec.More(); i++ {
		var e sharegptEntry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("%s: entry %d: %w: %w", name, i, ErrDataset, decodeError(err))
		}
		d.Conversations++
		if err := d.add(i, e); err != nil {
			return nil, fmt.Errorf("%s: entry %d: %w", name, i, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%s: entry %d: %w: %w", name, d.Conversations, ErrDataset, decodeError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: %w: more after the array (at byte %d)", name, ErrDataset, dec.InputOffset())
	}
	if len(d.Exchanges) == 0 {
		return nil, fmt.Errorf("%s: %w: no usable conversation: of %d, %d have fewer than two turns, %d no %s turn answered by a %s turn",
			name, ErrDataset, d.Conversations, d.Short, d.Unanswered, ShareGPTPrompt, ShareGPTReply)
	}
	return d, nil
}

// add checks entry i's turns and keeps its exchange, if it has one.
func (d *ShareGPT) add(i int, e sharegptEntry) error {
	var turns []sharegptTurn
	if e.Conversations != nil {
		turns = *e.Conversations
	}
	human, answered := -1, false
	for j, t := range turns {
		from, err := turnString(t.From, "from")
		if err != nil {
			return fmt.Errorf("turn %d: %w", j, err)
		}
		if err := checkString(t.Value, "value"); err != nil {
			return fmt.Errorf("turn %d: %w", j, err)
		}
		switch {
		case human < 0 && from == ShareGPTPrompt:
			human = j
		case human >= 0 && j == human+1:
			answered = from == ShareGPTReply
		}
	}
	switch {
	case len(turns) < 2:
		d.Short++
		return nil
	case !answered:
		d.Unanswered++
		return nil
	}
	prompt, _ := turnString(turns[human].Value, "value")
	reply, _ := turnString(turns[human+1].Value, "value")
	d.Exchanges = append(d.Exchanges, Exchange{Entry: i, Prompt: prompt, Reply: reply})
	return nil
}

// checkString checks that a turn's field is a JSON string of valid UTF-8.
func checkString(raw json.RawMessage, field string) error {
	switch {
	case raw == nil:
		return fmt.Errorf("%w: no %q", ErrDataset, field)
	case raw[0] != '"':
		return fmt.Errorf("%w: %q is not a string", ErrDataset, field)
	case !utf8.Valid(raw):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrDataset, field)
	}
	return nil
}

// turnString checks a turn's field as checkString does and returns its
// value.
func turnString(raw json.RawMessage, field string) (string, error) {
	if err := checkString(raw, field); err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: %q: %w", ErrDataset, field, err)
	}
	return s, nil
}

// decodeError describes an error of the decoder reading an entry in the
// file's terms rather than the Go types', with a syntax error's byte
// offset.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Type == reflect.TypeFor[sharegptEntry]():
		return fmt.Errorf("a JSON %s, not an object", te.Value)
	case errors.As(err, &te) && te.Type == reflect.TypeFor[[]sharegptTurn]():
		return fmt.Errorf("\"conversations\" is a JSON %s, not an array", te.Value)
	case errors.As(err, &te) && te.Type == reflect.TypeFor[sharegptTurn]():
		return fmt.Errorf("a turn of \"conversations\" is a JSON %s, not an object", te.Value)
	case errors.As(err, &se):
		return fmt.Errorf("%w (at byte %d)", err, se.Offset)
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the file ends before the array's closing ']': %w", io.ErrUnexpectedEOF)
	}
	return err
}

// Sample returns at most n requests (all when n < 1), seeded by seed as
// vLLM samples ShareGPT: the exchanges are shuffled, then taken in that
// order, each with the prompt's and the reply's token counts by count (the
// model's tokenizer, with the special tokens it adds, as vLLM counts),
// those outside lim skipped, until n are taken. A request asks for its
// reply's token count. count is called only for the exchanges looked at.
// Too few usable exchanges give fewer requests; none is an error.
func (d *ShareGPT) Sample(n int, seed uint64, count func(string) int, lim ShareGPTLimits) ([]Item, error) {
	if err := lim.check(); err != nil {
		return nil, err
	}
	if n < 1 || n > len(d.Exchanges) {
		n = len(d.Exchanges)
	}
	rng := rand.New(rand.NewPCG(seed, 0x73686172))
	items := make([]Item, 0, n)
	for _, k := range rng.Perm(len(d.Exchanges)) {
		if len(items) == n {
			break
		}
		ex := d.Exchanges[k]
		if ex.Prompt == "" {
			continue
		}
		p, o := count(ex.Prompt), count(ex.Reply)
		if lim.valid(p, o) {
			items = append(items, Item{Prompt: ex.Prompt, OutputTokens: o})
		}
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: %w: none of %d conversations within the limits: prompt and reply ≥ %d tokens, prompt ≤ %d, both ≤ %d",
			d.Name, ErrDataset, len(d.Exchanges), lim.MinTokens, lim.MaxPrompt, lim.MaxTotal)
	}
	return items, nil
}
