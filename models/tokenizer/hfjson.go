package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// This file reads Hugging Face's tokenizer.json into an hfModel.

// hfFile is the top level of tokenizer.json.
type hfFile struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
}

// hfAddedToken is one entry of added_tokens. The flags missing from an
// entry take the values of tokenizers' AddedToken::default().
type hfAddedToken struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

// hfBPE is the model section.
type hfBPE struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	FuseUnk                 bool             `json:"fuse_unk"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int64 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
}

// typed is the "type" tag of a component.
type typed struct {
	Type string `json:"type"`
}

// maxID bounds token ids, so that a hostile file cannot make the tables
// huge.
const maxID = 1 << 24

func parseJSON(data []byte) (*hfModel, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("not valid UTF-8: %w", ErrInvalid)
	}
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", jsonError(data, err), ErrInvalid)
	}
	if isNull(f.Model) {
		return nil, fmt.Errorf("no model: %w", ErrInvalid)
	}
	for _, c := range []struct {
		name string
		raw  json.RawMessage
	}{{"truncation", f.Truncation}, {"padding", f.Padding}} {
		if !isNull(c.raw) {
			return nil, fmt.Errorf("%s is set: only null is supported: %w", c.name, ErrUnsupported)
		}
	}
	m := &hfModel{unk: -1}
	if err := m.readModel(f.Model); err != nil {
		return nil, err
	}
	var err error
	if m.normalizers, err = readNormalizer("normalizer", f.Normalizer); err != nil {
		return nil, err
	}
	if m.preTokenizers, err = readPreTokenizer("pre_tokenizer", f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := m.readAddedTokens(f.AddedTokens); err != nil {
		return nil, err
	}
	if m.decoders, err = readDecoder("decoder", f.Decoder); err != nil {
		return nil, err
	}
	m.hasDecoder = !isNull(f.Decoder)
	if err := m.readPostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	m.findSpecials()
	m.streamWindow = m.windowSafe()
	return m, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// field is a JSON decoding helper naming where in the file a value is.
func field(where string, raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %v: %w", where, err, ErrInvalid)
	}
	return nil
}

func (m *hfModel) readModel(raw json.RawMessage) error {
	var t typed
	if err := field("model", raw, &t); err != nil {
		return err
	}
	if t.Type != "BPE" && t.Type != "" {
		return fmt.Errorf("model type %q: only BPE is supported: %w", t.Type, ErrUnsupported)
	}
	var b hfBPE
	if err := field("model", raw, &b); err != nil {
		return err
	}
	switch {
	case b.Type == "" && b.Vocab == nil:
		return fmt.Errorf("model: no type and no vocab: %w", ErrInvalid)
	case b.Dropout != nil && *b.Dropout != 0:
		return fmt.Errorf("model.dropout %v: only null is supported (dropout makes encoding random): %w", *b.Dropout, ErrUnsupported)
	case b.ContinuingSubwordPrefix != nil && *b.ContinuingSubwordPrefix != "":
		return fmt.Errorf("model.continuing_subword_prefix %q: only null is supported: %w", *b.ContinuingSubwordPrefix, ErrUnsupported)
	case b.EndOfWordSuffix != nil && *b.EndOfWordSuffix != "":
		return fmt.Errorf("model.end_of_word_suffix %q: only null is supported: %w", *b.EndOfWordSuffix, ErrUnsupported)
	case b.Vocab == nil:
		return fmt.Errorf("model.vocab missing: %w", ErrInvalid)
	case isNull(b.Merges):
		return fmt.Errorf("model.merges missing: %w", ErrInvalid)
	}
	m.fuseUnk, m.byteFallback, m.ignoreMerges = b.FuseUnk, b.ByteFallback, b.IgnoreMerges

	m.vocab = make(map[string]int32, len(b.Vocab))
	m.nVocab = len(b.Vocab)
	maxV := int64(-1)
	bad := ""
	for tok, id := range b.Vocab {
		if id < 0 || id >= maxID {
			if bad == "" || tok < bad {
				bad = tok
			}
			continue
		}
		m.vocab[tok] = int32(id)
		maxV = max(maxV, id)
	}
	if bad != "" {
		return fmt.Errorf("model.vocab[%q]: id %d out of range [0, %d): %w", bad, b.Vocab[bad], maxID, ErrInvalid)
	}
	m.maxVocabID = int(maxV)
	m.tokens = make(map[int32]string, len(m.vocab))
	dupID := int32(-1)
	for tok, id := range m.vocab {
		if other, dup := m.tokens[id]; dup {
			if dupID < 0 || id < dupID {
				dupID = id
			}
			m.tokens[id] = min(tok, other)
			continue
		}
		m.tokens[id] = tok
	}
	if dupID >= 0 {
		var names []string
		for tok, id := range m.vocab {
			if id == dupID {
				names = append(names, tok)
			}
		}
		slices.Sort(names)
		return fmt.Errorf("model.vocab: %q and %q both have id %d: %w", names[0], names[1], dupID, ErrInvalid)
	}
	for i := range m.byteIDs {
		m.byteIDs[i] = -1
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", i)]; ok {
			m.byteIDs[i] = id
		}
	}
	if b.UnkToken != nil {
		id, ok := m.vocab[*b.UnkToken]
		if !ok {
			return fmt.Errorf("model.unk_token %q is not in model.vocab: %w", *b.UnkToken, ErrInvalid)
		}
		m.unk = id
	}
	if m.unk < 0 && !(m.byteFallback && !slices.Contains(m.byteIDs[:], -1)) {
		return fmt.Errorf("model has no unk_token and no byte fallback for all 256 bytes: a character outside the vocabulary could not be encoded: %w", ErrUnsupported)
	}
	return m.readMerges(b.Merges)
}

// readMerges reads model.merges, as "a b" strings or as [a, b] pairs. A
// later merge of the same pair replaces an earlier one, as in tokenizers.
func (m *hfModel) readMerges(raw json.RawMessage) error {
	var pairs [][]string
	var legacy []string
	if err := json.Unmarshal(raw, &legacy); err == nil {
		pairs = make([][]string, 0, len(legacy))
		for i, s := range legacy {
			if i == 0 && strings.HasPrefix(s, "#version") {
				continue
			}
			parts := strings.Split(s, " ")
			if len(parts) != 2 {
				return fmt.Errorf("model.merges[%d] %q: not two tokens separated by one space: %w", i, s, ErrInvalid)
			}
			pairs = append(pairs, parts)
		}
	} else if err := json.Unmarshal(raw, &pairs); err != nil {
		return fmt.Errorf("model.merges: neither a list of \"a b\" strings nor a list of [a, b] pairs: %w", ErrInvalid)
	}
	m.merges = make(map[uint64]merge, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return fmt.Errorf("model.merges[%d]: %d tokens, want 2: %w", i, len(p), ErrInvalid)
		}
		var ids [3]int32
		for j, tok := range []string{p[0], p[1], p[0] + p[1]} {
			id, ok := m.vocab[tok]
			if !ok {
				return fmt.Errorf("model.merges[%d] %q %q: %q is not in model.vocab: %w", i, p[0], p[1], tok, ErrInvalid)
			}
			ids[j] = id
		}
		m.merges[pairKey(ids[0], ids[1])] = merge{rank: int32(i), id: ids[2]}
	}
	return nil
}

// readAddedTokens registers added_tokens as tokenizers' AddedVocabulary
// does: a token already in the model's vocabulary (or added before) keeps
// that id, and any other takes the next free id from the model's
// vocabulary size on, whatever id the file writes beside it.
func (m *hfModel) readAddedTokens(tokens []hfAddedToken) error {
	m.addedIDs = map[string]int32{}
	m.addedTokens = map[int32]*addedToken{}
	m.special = map[string]bool{}
	next := int32(m.nVocab)
	for i, t := range tokens {
		if t.Content == "" {
			continue
		}
		if !utf8.ValidString(t.Content) {
			return fmt.Errorf("added_tokens[%d]: content is not valid UTF-8: %w", i, ErrInvalid)
		}
		a := &addedToken{
			content:    t.Content,
			singleWord: t.SingleWord,
			lstrip:     t.LStrip,
			rstrip:     t.RStrip,
			normalized: t.Normalized == nil || *t.Normalized,
			special:    t.Special,
		}
		id, ok := m.addedIDs[a.content]
		if !ok {
			id, ok = m.vocab[a.content]
		}
		if !ok {
			if next >= maxID {
				return fmt.Errorf("added_tokens[%d]: too many tokens: %w", i, ErrInvalid)
			}
			id = next
			next++
		}
		if a.normalized {
			a.pattern = m.normalize(a.content, 0).s
		} else {
			a.pattern = a.content
		}
		m.addedIDs[a.content] = id
		if a.special {
			m.special[a.content] = true
		}
		m.addedTokens[id] = a
	}
	m.size = m.maxVocabID + 1
	for id := range m.addedTokens {
		m.size = max(m.size, int(id)+1)
	}
	m.matchRaw, m.matchNormalized = newMatcher(m.addedTokens, false), newMatcher(m.addedTokens, true)
	return nil
}

// readSequence reads a Sequence section: the list under key, each item
// read by read, their steps in order.
func readSequence[T any](where string, raw json.RawMessage, key string, read func(string, json.RawMessage) ([]T, error)) ([]T, error) {
	var s map[string]json.RawMessage
	if err := field(where, raw, &s); err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if list, ok := s[key]; ok {
		if err := field(where+"."+key, list, &items); err != nil {
			return nil, err
		}
	}
	var steps []T
	for i, item := range items {
		sub, err := read(fmt.Sprintf("%s.%s[%d]", where, key, i), item)
		if err != nil {
			return nil, err
		}
		steps = append(steps, sub...)
	}
	return steps, nil
}

// readNormalizer reads the normalizer section: null, Prepend, Replace with a
// string pattern, or a Sequence of these.
func readNormalizer(where string, raw json.RawMessage) ([]normStep, error) {
	if isNull(raw) {
		return nil, nil
	}
	var t typed
	if err := field(where, raw, &t); err != nil {
		return nil, err
	}
	switch t.Type {
	case "Sequence":
		return readSequence(where, raw, "normalizers", readNormalizer)
	case "Prepend":
		var p struct {
			Prepend *string `json:"prepend"`
		}
		if err := field(where, raw, &p); err != nil {
			return nil, err
		}
		if p.Prepend == nil {
			return nil, fmt.Errorf("%s: Prepend without prepend: %w", where, ErrInvalid)
		}
		return []normStep{{prepend: *p.Prepend}}, nil
	case "Replace":
		pattern, content, err := readReplace(where, raw)
		if err != nil {
			return nil, err
		}
		return []normStep{{replace: true, pattern: pattern, content: content}}, nil
	case "":
		return nil, fmt.Errorf("%s: no type: %w", where, ErrInvalid)
	}
	return nil, fmt.Errorf("%s type %q: only Prepend, Replace and Sequence are supported: %w", where, t.Type, ErrUnsupported)
}

// readReplace reads a Replace normalizer or decoder.
func readReplace(where string, raw json.RawMessage) (pattern, content string, err error) {
	var r struct {
		Pattern struct {
			String *string `json:"String"`
			Regex  *string `json:"Regex"`
		} `json:"pattern"`
		Content *string `json:"content"`
	}
	if err := field(where, raw, &r); err != nil {
		return "", "", err
	}
	switch {
	case r.Pattern.Regex != nil:
		return "", "", fmt.Errorf("%s: Replace with a Regex pattern: only String patterns are supported: %w", where, ErrUnsupported)
	case r.Pattern.String == nil || r.Content == nil:
		return "", "", fmt.Errorf("%s: Replace needs pattern.String and content: %w", where, ErrInvalid)
	case *r.Pattern.String == "":
		return "", "", fmt.Errorf("%s: Replace with an empty pattern: %w", where, ErrUnsupported)
	}
	return *r.Pattern.String, *r.Content, nil
}

// readMetaspace reads a Metaspace pre-tokenizer or decoder as tokenizers
// deserializes it: prepend_scheme defaults to always, add_prefix_space
// false means never, split defaults to true.
func readMetaspace(where string, raw json.RawMessage) (metaspace, error) {
	var ms struct {
		Replacement    *string `json:"replacement"`
		AddPrefixSpace *bool   `json:"add_prefix_space"`
		PrependScheme  *string `json:"prepend_scheme"`
		Split          *bool   `json:"split"`
	}
	if err := field(where, raw, &ms); err != nil {
		return metaspace{}, err
	}
	if ms.Replacement == nil || utf8.RuneCountInString(*ms.Replacement) != 1 {
		return metaspace{}, fmt.Errorf("%s: Metaspace replacement must be one character: %w", where, ErrInvalid)
	}
	r, _ := utf8.DecodeRuneInString(*ms.Replacement)
	out := metaspace{replacement: r, scheme: prependAlways, split: ms.Split == nil || *ms.Split}
	if ms.PrependScheme != nil {
		switch *ms.PrependScheme {
		case "always":
		case "first":
			out.scheme = prependFirst
		case "never":
			out.scheme = prependNever
		default:
			return metaspace{}, fmt.Errorf("%s: Metaspace prepend_scheme %q, want always, first or never: %w", where, *ms.PrependScheme, ErrInvalid)
		}
	}
	if ms.AddPrefixSpace != nil && !*ms.AddPrefixSpace {
		if out.scheme != prependNever && ms.PrependScheme != nil {
			return metaspace{}, fmt.Errorf("%s: Metaspace add_prefix_space false does not match prepend_scheme %q: %w", where, *ms.PrependScheme, ErrInvalid)
		}
		out.scheme = prependNever
	}
	return out, nil
}

// readPreTokenizer reads the pre_tokenizer section: null, Metaspace, or a
// Sequence of them.
func readPreTokenizer(where string, raw json.RawMessage) ([]metaspace, error) {
	if isNull(raw) {
		return nil, nil
	}
	var t typed
	if err := field(where, raw, &t); err != nil {
		return nil, err
	}
	switch t.Type {
	case "Sequence":
		return readSequence(where, raw, "pretokenizers", readPreTokenizer)
	case "Metaspace":
		ms, err := readMetaspace(where, raw)
		if err != nil {
			return nil, err
		}
		return []metaspace{ms}, nil
	case "ByteLevel":
		return nil, fmt.Errorf("%s type ByteLevel (byte-level BPE, as in Llama 3 or GPT-2): only SentencePiece-style BPE (Metaspace) is supported: %w", where, ErrUnsupported)
	case "":
		return nil, fmt.Errorf("%s: no type: %w", where, ErrInvalid)
	}
	return nil, fmt.Errorf("%s type %q: only Metaspace and Sequence are supported: %w", where, t.Type, ErrUnsupported)
}

// readDecoder reads the decoder section: null, Replace, ByteFallback, Fuse,
// Strip, Metaspace, or a Sequence of them.
func readDecoder(where string, raw json.RawMessage) ([]decodeStep, error) {
	if isNull(raw) {
		return nil, nil
	}
	var t typed
	if err := field(where, raw, &t); err != nil {
		return nil, err
	}
	switch t.Type {
	case "Sequence":
		return readSequence(where, raw, "decoders", readDecoder)
	case "Replace":
		pattern, content, err := readReplace(where, raw)
		if err != nil {
			return nil, err
		}
		return []decodeStep{{kind: decReplace, pattern: pattern, content: content}}, nil
	case "ByteFallback":
		return []decodeStep{{kind: decByteFallback}}, nil
	case "Fuse":
		return []decodeStep{{kind: decFuse}}, nil
	case "Strip":
		var s struct {
			Content *string `json:"content"`
			Start   *int64  `json:"start"`
			Stop    *int64  `json:"stop"`
		}
		if err := field(where, raw, &s); err != nil {
			return nil, err
		}
		if s.Content == nil || utf8.RuneCountInString(*s.Content) != 1 || s.Start == nil || s.Stop == nil ||
			*s.Start < 0 || *s.Stop < 0 || *s.Start > math.MaxInt32 || *s.Stop > math.MaxInt32 {
			return nil, fmt.Errorf("%s: Strip needs a one-character content and non-negative start and stop: %w", where, ErrInvalid)
		}
		r, _ := utf8.DecodeRuneInString(*s.Content)
		return []decodeStep{{kind: decStrip, strip: r, start: int(*s.Start), stop: int(*s.Stop)}}, nil
	case "Metaspace":
		ms, err := readMetaspace(where, raw)
		if err != nil {
			return nil, err
		}
		return []decodeStep{{kind: decMetaspace, meta: ms}}, nil
	case "":
		return nil, fmt.Errorf("%s: no type: %w", where, ErrInvalid)
	}
	return nil, fmt.Errorf("%s type %q: only Replace, ByteFallback, Fuse, Strip, Metaspace and Sequence are supported: %w", where, t.Type, ErrUnsupported)
}

// readPostProcessor reads the post_processor section: null,
// TemplateProcessing, or a Sequence holding at most one TemplateProcessing.
// Only the single-sequence template matters to Encode.
func (m *hfModel) readPostProcessor(raw json.RawMessage) error {
	return m.readProcessor("post_processor", raw, new(bool))
}

func (m *hfModel) readProcessor(where string, raw json.RawMessage, seen *bool) error {
	if isNull(raw) {
		return nil
	}
	var t typed
	if err := field(where, raw, &t); err != nil {
		return err
	}
	switch t.Type {
	case "Sequence":
		var s struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := field(where, raw, &s); err != nil {
			return err
		}
		for i, p := range s.Processors {
			if err := m.readProcessor(fmt.Sprintf("%s.processors[%d]", where, i), p, seen); err != nil {
				return err
			}
		}
		return nil
	case "TemplateProcessing":
		if *seen {
			return fmt.Errorf("%s: a second TemplateProcessing: %w", where, ErrUnsupported)
		}
		*seen = true
		return m.readTemplate(where, raw)
	case "":
		return fmt.Errorf("%s: no type: %w", where, ErrInvalid)
	}
	return fmt.Errorf("%s type %q: only TemplateProcessing and Sequence are supported: %w", where, t.Type, ErrUnsupported)
}

// readTemplate reads TemplateProcessing's single template into the ids
// added before and after the text.
func (m *hfModel) readTemplate(where string, raw json.RawMessage) error {
	type piece struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
		Sequence *struct {
			ID string `json:"id"`
		} `json:"Sequence"`
	}
	var tp struct {
		Single        []piece `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int64 `json:"ids"`
		} `json:"special_tokens"`
	}
	if err := field(where, raw, &tp); err != nil {
		return err
	}
	seq := false
	for i, p := range tp.Single {
		w := fmt.Sprintf("%s.single[%d]", where, i)
		switch {
		case p.Sequence != nil && p.SpecialToken == nil:
			if p.Sequence.ID != "A" || seq {
				return fmt.Errorf("%s: sequence %q: the single template holds sequence A once: %w", w, p.Sequence.ID, ErrInvalid)
			}
			seq = true
		case p.SpecialToken != nil && p.Sequence == nil:
			st, ok := tp.SpecialTokens[p.SpecialToken.ID]
			if !ok {
				return fmt.Errorf("%s: special token %q is not in special_tokens: %w", w, p.SpecialToken.ID, ErrInvalid)
			}
			for _, id := range st.IDs {
				if id < 0 || int(id) >= m.size || !m.hasID(int(id)) {
					return fmt.Errorf("%s: special token %q has id %d, which names no token: %w", w, p.SpecialToken.ID, id, ErrInvalid)
				}
				if seq {
					m.suffix = append(m.suffix, int(id))
				} else {
					m.prefix = append(m.prefix, int(id))
				}
			}
		default:
			return fmt.Errorf("%s: want one of SpecialToken or Sequence: %w", w, ErrInvalid)
		}
	}
	if !seq {
		return fmt.Errorf("%s.single: no sequence A: %w", where, ErrInvalid)
	}
	return nil
}

// findSpecials picks BOS and EOS: the first special token the template
// adds before the text is BOS; EOS is the template's last suffix token, or
// else the first of </s>, <|end_of_text|>, <eos> the tokenizer has.
func (m *hfModel) findSpecials() {
	m.bos, m.eos = -1, -1
	if len(m.prefix) > 0 {
		m.bos = m.prefix[0]
	} else if id, ok := m.id("<s>"); ok {
		m.bos = id
	}
	if len(m.suffix) > 0 {
		m.eos = m.suffix[len(m.suffix)-1]
		return
	}
	for _, name := range []string{"</s>", "<|end_of_text|>", "<eos>"} {
		if id, ok := m.id(name); ok {
			m.eos = id
			return
		}
	}
}
