package chat

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzTemplate: a chat template from a checkpoint's files, whatever its
// text, either fails to compile or renders each conversation to a text or
// an error wrapping ErrTemplate; it never panics.
func FuzzTemplate(f *testing.F) {
	g := readGolden(f)
	for _, src := range g.Templates {
		f.Add(src, "user", "Hello")
	}
	f.Add(Plain, "system", "Be brief.")
	f.Add(Plain, "tool", "refused")
	for _, src := range []string{"", "{{", "{% for m in messages %}", "{{ messages[0]['content'] | upper }}",
		"{% if x %}{% endif", "{{ raise_exception('no') }}", "{{ 1/0 }}", "{{ messages[9].role }}",
		"{% set x = messages %}{% for a in x %}{% for b in x %}{{ a.role ~ b.role }}{% endfor %}{% endfor %}"} {
		f.Add(src, "assistant", "{{ not a template }}")
	}
	f.Fuzz(func(t *testing.T, src, role, content string) {
		tmpl, err := Compile(src, "<s>", "</s>")
		if err != nil {
			require.True(t, errors.Is(err, ErrTemplate), "%v", err)
			return
		}
		for _, msgs := range [][]Message{nil, {{Role: role, Content: content}},
			{{Role: "system", Content: content}, {Role: role, Content: content}, {Role: "assistant", Content: "ok"}}} {
			if _, err := tmpl.Render(msgs); err != nil {
				require.True(t, errors.Is(err, ErrTemplate), "%v", err)
			}
		}
	})
}
