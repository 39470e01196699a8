package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/tokenizer"
)

// goldenCases are testdata/golden/chat-templates.json, which
// testdata/reference/chat.py writes with Jinja2.
type goldenCases struct {
	Templates map[string]string
	Cases     []struct {
		Name, Template, Bos, Eos string
		Messages                 []Message
		Text                     *string
		Error                    *string
	}
}

func readGolden(t testing.TB) goldenCases {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "golden", "chat-templates.json"))
	require.NoError(t, err)
	var g goldenCases
	require.NoError(t, json.Unmarshal(data, &g))
	require.NotEmpty(t, g.Cases)
	return g
}

// knownDeviations are the golden file's templates that the Jinja engine
// renders otherwise than Jinja2, with the reason. The test checks that they
// still differ, so that an engine that renders them right is noticed.
var knownDeviations = map[string]string{
	// github.com/ardanlabs/jinja v1.8.0 applies trim_blocks after a block
	// tag to the first text after it even when an expression comes
	// between them, dropping the newline of "{% for %}{{ x }}\n".
	"adjacent": "trim_blocks reaches past an expression",
}

// TestRenderMatchesJinja2 renders every template of the golden file over
// every conversation and compares with what Jinja2 rendered, set up as
// transformers sets it up.
func TestRenderMatchesJinja2(t *testing.T) {
	g := readGolden(t)
	require.Equal(t, Plain, g.Templates["plain"], "the golden file was made from another Plain: run testdata/reference/chat.py")
	for _, c := range g.Cases {
		t.Run(c.Name, func(t *testing.T) {
			tmpl, err := Compile(g.Templates[c.Template], c.Bos, c.Eos)
			require.NoError(t, err)
			got, err := tmpl.Render(c.Messages)
			if c.Error != nil {
				require.ErrorIs(t, err, ErrTemplate)
				assert.Contains(t, err.Error(), *c.Error)
				return
			}
			require.NoError(t, err)
			if why, ok := knownDeviations[c.Template]; ok {
				assert.NotEqual(t, *c.Text, got, "renders as Jinja2 does now (%s): drop it from knownDeviations", why)
				return
			}
			assert.Equal(t, *c.Text, got)
		})
	}
}

func TestCompileError(t *testing.T) {
	for _, src := range []string{"{% for m in messages %}", "{{ messages[ }}", "{% endfor %}", "{{ 1 + }}"} {
		_, err := Compile(src, "<s>", "</s>")
		assert.ErrorIs(t, err, ErrTemplate, src)
	}
}

// TestFor takes the tokenizer's own template when its files give one, and
// Plain otherwise, with the tokenizer's BOS and EOS texts.
func TestFor(t *testing.T) {
	src := filepath.Join("..", "..", "testdata", "golden", "llama-tiny")
	msgs := []Message{{"user", "Hi"}}
	for _, tc := range []struct {
		name   string
		config string // tokenizer_config.json, "" for none
		jinja  string // chat_template.jinja, "" for none
		want   string
		errHas string
	}{
		{name: "none", want: "<s><|user|>\nHi</s>\n<|assistant|>\n"},
		{name: "config string", config: `{"chat_template": "{{ eos_token }}{% for m in messages %}[{{ m.content }}]{% endfor %}"}`, want: "</s>[Hi]"},
		{name: "config list", config: `{"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ bos_token }}"}]}`, want: "D<s>"},
		{name: "jinja file wins", config: `{"chat_template": "config"}`, jinja: "file {{ messages | length }}", want: "file 1"},
		{name: "jinja file alone", jinja: "{{ messages[0].role }}", want: "user"},
		{name: "list without default", config: `{"chat_template": [{"name": "rag", "template": "R"}]}`, errHas: `none named "default"`},
		{name: "not a template", config: `{"chat_template": 7}`, errHas: "chat_template"},
		{name: "bad jinja", config: `{"chat_template": "{% if %}"}`, errHas: "chat template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data, err := os.ReadFile(filepath.Join(src, tokenizer.JSONFile))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, tokenizer.JSONFile), data, 0o644))
			if tc.config != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, tokenizer.ConfigFile), []byte(tc.config), 0o644))
			}
			if tc.jinja != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, tokenizer.ChatTemplateFile), []byte(tc.jinja), 0o644))
			}
			tok, err := tokenizer.Load(dir)
			if err == nil {
				var tmpl *Template
				if tmpl, err = For(tok); err == nil {
					var got string
					got, err = tmpl.Render(msgs)
					if tc.errHas == "" {
						require.NoError(t, err)
						assert.Equal(t, tc.want, got)
						return
					}
				}
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.errHas)
			assert.Contains(t, err.Error(), dir)
		})
	}
}
