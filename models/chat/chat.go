// Package chat lays out a conversation as a model's prompt: the chat
// template a checkpoint ships (Jinja, rendered as transformers'
// apply_chat_template renders it), or a plain one for checkpoints without.
package chat

import (
	"errors"
	"fmt"

	"github.com/ardanlabs/jinja"

	"github.com/zbench/zbench/models/tokenizer"
)

// ErrTemplate marks a chat template that does not compile, or a
// conversation it refuses to lay out.
var ErrTemplate = errors.New("chat template")

// A Message is one turn of a conversation.
type Message struct {
	Role    string
	Content string
}

// Plain is the template for checkpoints that have none: Zephyr's layout,
// which TinyLlama's chat models use, each message as "<|role|>\n" content
// EOS "\n" after BOS, then "<|assistant|>\n"; roles other than system,
// user and assistant are refused.
const Plain = `{{ bos_token }}
{%- for m in messages %}
{%- if m.role not in ['system', 'user', 'assistant'] %}
{{- raise_exception('messages[' ~ loop.index0 ~ '].role: role "' ~ m.role ~ '": want system, user or assistant') }}
{%- endif %}
{{- '<|' ~ m.role ~ '|>\n' ~ m.content ~ eos_token ~ '\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}`

// A Template is a compiled chat template with the special tokens it is
// given. It is safe for concurrent use.
type Template struct {
	t        *jinja.Template
	bos, eos string
	// Source is the template's Jinja text.
	Source string
}

// Compile compiles a chat template's source; bos and eos are the texts of
// the tokenizer's special tokens (bos_token and eos_token in the
// template).
func Compile(source, bos, eos string) (*Template, error) {
	t, err := jinja.Compile(source)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	return &Template{t: t, bos: bos, eos: eos, Source: source}, nil
}

// For returns tok's chat template (Plain when its files give none), with
// its BOS and EOS tokens.
func For(tok *tokenizer.Tokenizer) (*Template, error) {
	src := tok.ChatTemplate()
	if src == "" {
		src = Plain
	}
	bos, _ := tok.Token(tok.BOS())
	eos, _ := tok.Token(tok.EOS())
	t, err := Compile(src, bos, eos)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tok.Path(), err)
	}
	return t, nil
}

// Render lays out msgs, followed by the assistant's turn's opening
// (add_generation_prompt). Its text holds the special tokens as text, and
// is encoded without adding any (transformers' apply_chat_template).
func (t *Template) Render(msgs []Message) (string, error) {
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		// A dict keeps its keys' order, as Python's does: role, then content.
		d := jinja.NewDict()
		d.AsDict().Set("role", jinja.NewString(m.Role))
		d.AsDict().Set("content", jinja.NewString(m.Content))
		list[i] = d
	}
	s, err := t.t.RenderValues(map[string]jinja.Value{
		"messages":              jinja.NewList(list),
		"add_generation_prompt": jinja.NewBool(true),
		"bos_token":             jinja.NewString(t.bos),
		"eos_token":             jinja.NewString(t.eos),
	})
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	return s, nil
}
