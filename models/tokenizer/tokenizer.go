// Package tokenizer turns text into the token ids of Llama-family models
// and back, exactly as the reference tokenizers do.
//
// Two file formats are read:
//
//   - tokenizer.json, Hugging Face's tokenizers format, of the
//     SentencePiece-BPE kind Llama 2, TinyLlama and Mistral use: a BPE model
//     (vocab, merges as "a b" strings or [a, b] pairs, unk_token, fuse_unk,
//     byte_fallback, ignore_merges), the normalizer Sequence of Prepend("▁")
//     and Replace(" " → "▁") or the Metaspace pre-tokenizer (prepend_scheme
//     always, first or never; split or not), added tokens (<s>, </s>,
//     <unk>, ...) found in the text as Hugging Face finds them (leftmost
//     longest, with single_word, lstrip, rstrip and normalized), the
//     TemplateProcessing post-processor that adds BOS, and the decoders
//     Replace, ByteFallback, Fuse, Strip and Metaspace. Encoding and decoding
//     follow the tokenizers library (github.com/huggingface/tokenizers).
//   - tokenizer.model, a SentencePiece ModelProto of the BPE type: pieces
//     with their scores and types (normal, unknown, control, user-defined,
//     unused, byte), merged by score as SentencePiece merges them, byte
//     fallback, and the normalizer_spec's add_dummy_prefix,
//     remove_extra_whitespaces and escape_whitespaces with the identity
//     normalization rule (Llama's). Encoding and decoding follow
//     SentencePiece (github.com/google/sentencepiece).
//
// Anything else (a Unigram or WordPiece model, byte-level BPE as in Llama 3,
// regular-expression patterns, Unicode normalization tables) is refused when
// the file is loaded, naming what is not supported; a malformed file is
// refused naming the file and what is wrong. Nothing is ever guessed.
//
// Decode leaves out special tokens (Hugging Face's skip_special_tokens, and
// SentencePiece's control pieces), as generated text is printed; a Stream
// decodes ids one at a time as a model generates them.
package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Errors wrapped by this package's errors, for errors.Is.
var (
	// ErrInvalid marks a malformed tokenizer file.
	ErrInvalid = errors.New("invalid tokenizer file")
	// ErrUnsupported marks a well-formed tokenizer of a kind this package
	// does not implement.
	ErrUnsupported = errors.New("unsupported tokenizer")
	// ErrID marks a token id the tokenizer does not have.
	ErrID = errors.New("no such token id")
)

// Names of the files Load looks for in a checkpoint directory.
const (
	JSONFile         = "tokenizer.json"
	ModelFile        = "tokenizer.model"
	ConfigFile       = "tokenizer_config.json"
	ChatTemplateFile = "chat_template.jinja"
)

// Tokenizer encodes text into token ids and decodes ids into text. It is
// safe for concurrent use.
type Tokenizer struct {
	path string
	m    model
	// prefix and suffix are the ids Encode adds around the text when
	// asked to add special tokens.
	prefix, suffix []int
	bos, eos       int
	// chatTemplate is the Jinja source of the chat template, "" when none.
	chatTemplate string
}

// model is one tokenizer format's implementation.
type model interface {
	// encode returns the ids of text, without special tokens around it.
	encode(text string) []int
	// vocabSize is one more than the largest id.
	vocabSize() int
	// hasID reports whether id names a token.
	hasID(id int) bool
	// id returns the id of a token given by its text, and whether there is
	// one.
	id(token string) (int, bool)
	// newDecoder returns a decoder positioned at the start of a text.
	newDecoder() decoder
	// specials returns the ids encode adds before and after a text, and
	// the BOS and EOS ids (-1 when none).
	specials() (prefix, suffix []int, bos, eos int)
	// text returns the token's text as the file spells it, and whether
	// id names a token.
	text(id int) (string, bool)
}

// A decoder turns ids into text incrementally: push returns the text that
// has become final, and flush what remains at the end.
type decoder interface {
	push(id int) string
	flush() string
}

// Load reads a tokenizer from path: a tokenizer.json or tokenizer.model
// file (the format is told by the content: JSON starts with '{', anything
// else is read as a SentencePiece model, unless the name ends in .json), or
// a checkpoint directory holding one of them (tokenizer.json preferred, as
// Hugging Face's fast tokenizers prefer it). In a directory, the
// tokenizer_config.json beside it, when present, decides whether Encode adds
// BOS and EOS (add_bos_token, add_eos_token) and which tokens they are
// (bos_token, eos_token), as transformers' Llama tokenizers do, and the chat
// template is chat_template.jinja's, else tokenizer_config.json's
// chat_template; a file given by itself is used as its format's reference
// library would use it.
func Load(path string) (*Tokenizer, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var cfg *config
	if info.IsDir() {
		dir := path
		path = ""
		for _, name := range []string{JSONFile, ModelFile} {
			p := filepath.Join(dir, name)
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("tokenizer: %w", err)
			}
		}
		if path == "" {
			return nil, fmt.Errorf("tokenizer: %s: no %s or %s: %w", dir, JSONFile, ModelFile, fs.ErrNotExist)
		}
		if cfg, err = readConfig(filepath.Join(dir, ConfigFile)); err != nil {
			return nil, err
		}
		if cfg, err = readChatTemplate(filepath.Join(dir, ChatTemplateFile), cfg); err != nil {
			return nil, err
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := parse(path, data)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		if err := t.configure(cfg); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Parse reads a tokenizer from the content of a tokenizer.json or
// tokenizer.model file; name is used in error messages and to tell the
// format as Load does.
func Parse(name string, data []byte) (*Tokenizer, error) {
	return parse(name, data)
}

func parse(name string, data []byte) (*Tokenizer, error) {
	var (
		m   model
		err error
	)
	if isJSON(name, data) {
		m, err = parseJSON(data)
	} else {
		m, err = parseModelProto(data)
	}
	if err != nil {
		if name == "" {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		return nil, fmt.Errorf("tokenizer: %s: %w", name, err)
	}
	t := &Tokenizer{path: name, m: m}
	t.prefix, t.suffix, t.bos, t.eos = m.specials()
	return t, nil
}

// isJSON tells a tokenizer.json from a SentencePiece model.
func isJSON(name string, data []byte) bool {
	if strings.HasSuffix(strings.ToLower(name), ".json") {
		return true
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{'
}

// Path returns the file the tokenizer was read from.
func (t *Tokenizer) Path() string { return t.path }

// Encode returns the token ids of text. With addSpecial, the special tokens
// the tokenizer adds around a text are added: BOS for Llama (Hugging Face's
// add_special_tokens; for a tokenizer.model, BOS unless tokenizer_config.json
// says add_bos_token false, and EOS when it says add_eos_token true).
// Invalid UTF-8 in text is read as one U+FFFD per bad byte.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int {
	ids := t.m.encode(text)
	if !addSpecial || len(t.prefix)+len(t.suffix) == 0 {
		return ids
	}
	out := make([]int, 0, len(t.prefix)+len(ids)+len(t.suffix))
	out = append(out, t.prefix...)
	out = append(out, ids...)
	return append(out, t.suffix...)
}

// Decode returns the text of ids, leaving out special tokens. An id the
// tokenizer does not have is an error naming it.
func (t *Tokenizer) Decode(ids []int) (string, error) {
	if err := t.check(ids); err != nil {
		return "", err
	}
	d := t.m.newDecoder()
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(d.push(id))
	}
	b.WriteString(d.flush())
	return b.String(), nil
}

// check returns an error naming the first id the tokenizer does not have.
func (t *Tokenizer) check(ids []int) error {
	for i, id := range ids {
		if !t.m.hasID(id) {
			n := t.m.vocabSize()
			if id < 0 || id >= n {
				return fmt.Errorf("tokenizer: id %d (at %d) out of range [0, %d): %w", id, i, n, ErrID)
			}
			return fmt.Errorf("tokenizer: id %d (at %d) names no token: %w", id, i, ErrID)
		}
	}
	return nil
}

// BOS returns the id of the beginning-of-sequence token, or -1 if there is
// none.
func (t *Tokenizer) BOS() int { return t.bos }

// EOS returns the id of the end-of-sequence token, or -1 if there is none.
func (t *Tokenizer) EOS() int { return t.eos }

// VocabSize returns one more than the largest token id: the size of a
// model's embedding table for this tokenizer.
func (t *Tokenizer) VocabSize() int { return t.m.vocabSize() }

// Token returns the text of the token id as the file spells it (such as
// "<s>"), and whether there is one: ID's inverse.
func (t *Tokenizer) Token(id int) (string, bool) { return t.m.text(id) }

// ChatTemplate returns the Jinja source of the chat template the
// tokenizer's files give (chat_template.jinja or tokenizer_config.json's
// chat_template beside a tokenizer file, a GGUF file's
// tokenizer.chat_template), "" when they give none.
func (t *Tokenizer) ChatTemplate() string { return t.chatTemplate }

// ID returns the id of the token whose text (as the file spells it, such
// as "<s>" or "▁the") is token, and whether there is one.
func (t *Tokenizer) ID(token string) (int, bool) { return t.m.id(token) }

// config is what Load reads from tokenizer_config.json.
type config struct {
	path             string
	addBOS, addEOS   *bool
	bosToken, eosTok *string
	chatTemplate     string
}

// readConfig reads tokenizer_config.json; a missing file is no config.
func readConfig(path string) (*config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var raw struct {
		AddBOS *bool           `json:"add_bos_token"`
		AddEOS *bool           `json:"add_eos_token"`
		BOS    json.RawMessage `json:"bos_token"`
		EOS    json.RawMessage `json:"eos_token"`
		Chat   json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %v: %w", path, jsonError(data, err), ErrInvalid)
	}
	c := &config{path: path, addBOS: raw.AddBOS, addEOS: raw.AddEOS}
	if c.bosToken, err = tokenName(raw.BOS); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: bos_token: %v: %w", path, err, ErrInvalid)
	}
	if c.eosTok, err = tokenName(raw.EOS); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: eos_token: %v: %w", path, err, ErrInvalid)
	}
	if c.chatTemplate, err = chatTemplate(raw.Chat); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: chat_template: %v: %w", path, err, ErrInvalid)
	}
	return c, nil
}

// chatTemplate reads tokenizer_config.json's chat_template: null, a
// string, or a list of {"name", "template"} objects, of which the one
// named "default" is the one transformers applies when asked for none.
func chatTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", errors.New("not a string or a list of {\"name\", \"template\"} objects")
	}
	var names []string
	for i, n := range named {
		if n.Name == nil || n.Template == nil {
			return "", fmt.Errorf("entry %d lacks a string name or template", i)
		}
		if *n.Name == "default" {
			return *n.Template, nil
		}
		names = append(names, *n.Name)
	}
	return "", fmt.Errorf("%d named templates (%s) and none named \"default\"", len(named), strings.Join(names, ", "))
}

// readChatTemplate reads chat_template.jinja into c (a new config when c is
// nil): when present, it is the chat template, as transformers takes it
// over tokenizer_config.json's.
func readChatTemplate(path string, c *config) (*config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("tokenizer: %s is not valid UTF-8: %w", path, ErrInvalid)
	}
	if c == nil {
		c = &config{path: path}
	}
	c.chatTemplate = string(data)
	return c, nil
}

// tokenName reads a special token of tokenizer_config.json: null, a string,
// or an AddedToken object with its "content".
func tokenName(raw json.RawMessage) (*string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return &s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return nil, errors.New("not a string or an object with a string content")
	}
	return obj.Content, nil
}

// configure applies tokenizer_config.json: the BOS and EOS tokens, then
// whether Encode adds them. Either flag left out keeps what the tokenizer
// file says.
func (t *Tokenizer) configure(c *config) error {
	t.chatTemplate = c.chatTemplate
	lookup := func(field string, name *string, id *int) error {
		if name == nil {
			return nil
		}
		v, ok := t.m.id(*name)
		if !ok {
			return fmt.Errorf("tokenizer: %s: %s %q is not a token of %s: %w", c.path, field, *name, t.path, ErrInvalid)
		}
		*id = v
		return nil
	}
	if err := lookup("bos_token", c.bosToken, &t.bos); err != nil {
		return err
	}
	if err := lookup("eos_token", c.eosTok, &t.eos); err != nil {
		return err
	}
	set := func(field string, flag *bool, id int, ids *[]int) error {
		switch {
		case flag == nil:
		case !*flag:
			*ids = nil
		case id < 0:
			return fmt.Errorf("tokenizer: %s: %s is true but %s has no such token: %w", c.path, field, t.path, ErrInvalid)
		default:
			*ids = []int{id}
		}
		return nil
	}
	if err := set("add_bos_token", c.addBOS, t.bos, &t.prefix); err != nil {
		return err
	}
	return set("add_eos_token", c.addEOS, t.eos, &t.suffix)
}

// jsonError describes a JSON decoding error with its line and column when
// it has an offset.
func jsonError(data []byte, err error) string {
	var off int64 = -1
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return err.Error()
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Sprintf("line %d, column %d: %v", line, col, err)
}
