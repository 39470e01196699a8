package loadgen

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadJSONL(t *testing.T) {
	items, err := ReadJSONL(strings.NewReader("{\"prompt\":\"Hi there\",\"output_tokens\":16}\n\n  {\"prompt\":\"Ünïcode\",\"output_tokens\":1}\n"), "d.jsonl")
	require.NoError(t, err)
	assert.Equal(t, []Item{{"Hi there", 16}, {"Ünïcode", 1}}, items)
	for _, c := range []struct{ name, in, want string }{
		{"empty file", "\n\n", "d.jsonl: bad dataset: no requests"},
		{"not JSON", "{\"prompt\":\"a\",\"output_tokens\":1}\nnope\n", "d.jsonl:2: bad dataset: invalid character"},
		{"unknown field", `{"prompt":"a","output_tokens":1,"temp":0}`, `d.jsonl:1: bad dataset: json: unknown field "temp"`},
		{"two values", `{"prompt":"a","output_tokens":1} {}`, "d.jsonl:1: bad dataset: more than one JSON value"},
		{"a bracket after the value", `{"prompt":"a","output_tokens":1}]`, "d.jsonl:1: bad dataset: more than one JSON value on the line, or bytes after it"},
		{"empty prompt", `{"prompt":"","output_tokens":1}`, `d.jsonl:1: bad dataset: empty "prompt"`},
		{"no output tokens", `{"prompt":"a"}`, `d.jsonl:1: bad dataset: "output_tokens" 0 outside [1, 1048576]`},
		{"negative output tokens", `{"prompt":"a","output_tokens":-3}`, `"output_tokens" -3 outside`},
		{"bad UTF-8", "{\"prompt\":\"\xff\",\"output_tokens\":1}", "d.jsonl:1: bad dataset: the line is not valid UTF-8"},
		{"wrong type", `{"prompt":3,"output_tokens":1}`, "cannot unmarshal number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadJSONL(strings.NewReader(c.in), "d.jsonl")
			require.ErrorIs(t, err, ErrDataset)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Range
	}{{"7", Range{7, 7}}, {"16:128", Range{16, 128}}} {
		got, err := ParseRange(c.in)
		require.NoError(t, err)
		assert.Equal(t, c.want, got)
		assert.Equal(t, c.in, got.String())
	}
	for _, in := range []string{"", "0", "5:4", "a:b", "3:", "-1:2"} {
		_, err := ParseRange(in)
		assert.ErrorIs(t, err, ErrDataset, "%q", in)
	}
}

func TestSynthetic(t *testing.T) {
	a := Synthetic(50, Range{3, 9}, Range{4, 6}, 7)
	assert.Equal(t, a, Synthetic(50, Range{3, 9}, Range{4, 6}, 7), "seeded")
	assert.NotEqual(t, a, Synthetic(50, Range{3, 9}, Range{4, 6}, 8))
	outs := map[int]bool{}
	for _, it := range a {
		require.NoError(t, it.check())
		words := len(strings.Fields(it.Prompt))
		assert.True(t, words >= 3 && words <= 9, "%d words", words)
		assert.True(t, it.OutputTokens >= 4 && it.OutputTokens <= 6)
		outs[it.OutputTokens] = true
	}
	assert.Len(t, outs, 3, "every output length in the range drawn")
}

func TestSSEReader(t *testing.T) {
	in := ": keep-alive\n\nevent: message\ndata: one\n\ndata: two\ndata:three\nid: 9\n\ndata: [DONE]"
	r := newSSEReader(strings.NewReader(in))
	var got []string
	for {
		d, err := r.next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, string(d))
	}
	assert.Equal(t, []string{"one", "two\nthree", "[DONE]"}, got)
	_, err := newSSEReader(strings.NewReader("data: " + strings.Repeat("x", maxEventBytes+1))).next()
	assert.ErrorIs(t, err, ErrStream)
}

// FuzzSSEReader checks that any stream reads to its end or an error,
// without panicking, and that events written as the format says are read
// back.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("data: a\n\ndata: b\ndata: c\n\n"), "x")
	f.Add([]byte(":\n\nfield\ndata\n\n\n"), "")
	f.Fuzz(func(t *testing.T, stream []byte, event string) {
		r := newSSEReader(bytes.NewReader(stream))
		for {
			if _, err := r.next(); err != nil {
				break
			}
		}
		if strings.ContainsAny(event, "\r\n") || strings.HasPrefix(event, " ") {
			return
		}
		d, err := newSSEReader(strings.NewReader(": c\n\ndata: " + event + "\n\n")).next()
		require.NoError(t, err)
		assert.Equal(t, event, string(d))
	})
}

// FuzzReadJSONL checks that any file is read or refused with ErrDataset,
// and that what is read is valid.
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte("{\"prompt\":\"a\",\"output_tokens\":3}\n"))
	f.Add([]byte("{\"prompt\":\"\\u0000\",\"output_tokens\":1048577}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		items, err := ReadJSONL(bytes.NewReader(data), "f")
		if err != nil {
			require.ErrorIs(t, err, ErrDataset)
			return
		}
		require.NotEmpty(t, items)
		for _, it := range items {
			require.NoError(t, it.check())
		}
	})
}
