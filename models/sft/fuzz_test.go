package sft_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/sft"
)

// FuzzParseAlpaca checks that ParseAlpaca never panics, that its errors
// are data errors naming the file, and that what it accepts formats into
// examples the loader takes.
func FuzzParseAlpaca(f *testing.F) {
	sample, err := os.ReadFile(samplePath)
	require.NoError(f, err)
	for _, s := range []string{
		string(sample),
		`[{"instruction": "i", "input": "x", "output": "o"}]`,
		`[{"instruction": "i", "output": "o"}, {"instruction": "", "input": "", "output": ""}]`,
		`[{"instruction": "i", "output": 1}]`,
		`[{"instruction": "i"}]`,
		`[null, 1, "x"]`,
		`[]`, `{}`, ``, `[`, `[{"instruction": "\ud800", "output": "é"}] `,
	} {
		f.Add([]byte(s))
	}
	tok := byteTok{eos: 2}
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := sft.ParseAlpaca("fuzz.json", data)
		if err != nil {
			require.Nil(t, recs)
			require.True(t, errors.Is(err, sft.ErrData), "%v", err)
			require.True(t, strings.HasPrefix(err.Error(), "fuzz.json: "), "%v", err)
			return
		}
		require.NotEmpty(t, recs)
		examples := sft.Format(tok, recs)
		require.Len(t, examples, len(recs))
		for i, e := range examples {
			prompt := recs[i].Prompt()
			require.True(t, strings.Contains(prompt, recs[i].Instruction))
			require.Equal(t, recs[i].Input != "", strings.Contains(prompt, "### Input:\n"+recs[i].Input+"\n\n### Response:"))
			require.Len(t, e.IDs, len(tok.Encode(prompt+recs[i].Output, true))+1)
			require.Equal(t, len(recs[i].Output)+1, e.Tokens())
			require.Equal(t, int32(2), e.Labels[len(e.Labels)-1])
		}
		l, err := sft.NewLoader(examples, 2, 64, 0, true, 1)
		if err == nil {
			b := l.Next()
			require.Len(t, b.IDs, 2*64)
		}
	})
}

// FuzzParseJSONL checks that ParseJSONL never panics, that its errors are
// data errors naming the file and line, and that what it accepts holds its
// invariants: ids ≥ 0, labels -100 or ≥ 0, as many of each, something to
// learn on every line; and that the loader takes it.
func FuzzParseJSONL(f *testing.F) {
	for _, s := range []string{
		`{"input_ids": [1, 5, 2]}`,
		"{\"input_ids\": [1, 5, 6, 2], \"labels\": [-100, -100, 6, 2]}\n\n{\"input_ids\": [0]}\r\n",
		`{"input_ids": [1, 2], "labels": [-100, -100]}`,
		`{"input_ids": [1, 2], "labels": [-100]}`,
		`{"input_ids": [2147483648]}`,
		`{"input_ids": [1.5, -1, "2", null]}`,
		`[1]`, `{}`, ``, "\n", `{"input_ids": [1]} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		examples, err := sft.ParseJSONL("fuzz.jsonl", data)
		if err != nil {
			require.Nil(t, examples)
			require.True(t, errors.Is(err, sft.ErrData), "%v", err)
			require.True(t, strings.HasPrefix(err.Error(), "fuzz.jsonl: "), "%v", err)
			return
		}
		require.NotEmpty(t, examples)
		total := 0
		for _, e := range examples {
			require.NotEmpty(t, e.IDs)
			require.Len(t, e.Labels, len(e.IDs))
			for i, id := range e.IDs {
				require.GreaterOrEqual(t, id, int32(0))
				l := e.Labels[i]
				require.True(t, l == sft.IgnoreIndex || l >= 0, "label %d", l)
			}
			require.Positive(t, e.Tokens())
			total += len(e.IDs)
		}
		for _, pack := range []bool{false, true} {
			l, err := sft.NewLoader(examples, 3, 4, 0, pack, 5)
			if pack && total < 4 {
				require.ErrorIs(t, err, sft.ErrData)
				continue
			}
			if !pack && err != nil {
				// Only when every example's labels start after 4 tokens.
				require.ErrorIs(t, err, sft.ErrData)
				continue
			}
			require.NoError(t, err)
			for range 3 {
				b := l.Next()
				assert.Len(t, b.IDs, 12)
				assert.Len(t, b.Labels, 12)
			}
		}
	})
}
