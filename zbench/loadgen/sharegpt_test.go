package loadgen

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wordCount is a stand-in tokenizer for the tests: a token per word, and
// one for BOS.
func wordCount(s string) int { return len(strings.Fields(s)) + 1 }

func readSmall(t *testing.T) *ShareGPT {
	t.Helper()
	f, err := os.Open("testdata/sharegpt-small.json")
	require.NoError(t, err)
	defer f.Close()
	d, err := ReadShareGPT(f, "sharegpt-small.json")
	require.NoError(t, err)
	return d
}

// TestReadShareGPTFile reads the shipped file and checks its exchanges
// against the file decoded whole, the roles picked out independently.
func TestReadShareGPTFile(t *testing.T) {
	d := readSmall(t)
	data, err := os.ReadFile("testdata/sharegpt-small.json")
	require.NoError(t, err)
	var whole []struct {
		ID            string `json:"id"`
		Conversations []struct{ From, Value string }
	}
	require.NoError(t, json.Unmarshal(data, &whole))
	var want []Exchange
	for i, e := range whole {
		c := e.Conversations
		for j := range c {
			if c[j].From == "human" {
				if len(c) >= 2 && j+1 < len(c) && c[j+1].From == "gpt" {
					want = append(want, Exchange{i, c[j].Value, c[j+1].Value})
				}
				break
			}
		}
	}
	assert.Equal(t, want, d.Exchanges)
	assert.Equal(t, 30, d.Conversations)
	assert.Equal(t, 4, d.Short, "one turn or none: zb-03, zb-09, zb-12, zb-22")
	assert.Equal(t, 1, d.Unanswered, "two human turns first: zb-16")
	require.Len(t, d.Exchanges, 25)
	assert.Equal(t, "sharegpt-small.json", d.Name)

	byEntry := map[int]Exchange{}
	for _, ex := range d.Exchanges {
		byEntry[ex.Entry] = ex
	}
	assert.True(t, strings.HasPrefix(byEntry[3].Prompt, "Tomatoes and basil"), "zb-04 opens with gpt: its human turn is the prompt")
	assert.True(t, strings.HasPrefix(byEntry[3].Reply, "Both like warmth"))
	assert.True(t, strings.HasPrefix(byEntry[4].Prompt, "Why does bread"), "zb-05 opens with a system turn, left out")
	assert.True(t, strings.HasPrefix(byEntry[1].Reply, "Offline hands"), "zb-02: the first exchange of several")
	assert.Equal(t, "Le train part à neuf heures.", byEntry[9].Reply)
	assert.Equal(t, `fmt.Println("hello")`, byEntry[19].Reply, "escapes decoded")
}

func TestReadShareGPT(t *testing.T) {
	const hg = `{"conversations":[{"from":"human","value":"p"},{"from":"gpt","value":"r"}]}`
	for _, c := range []struct {
		name string
		in   string
		want *ShareGPT
	}{
		{"one", "[" + hg + "]", &ShareGPT{Exchanges: []Exchange{{0, "p", "r"}}, Conversations: 1}},
		{"white space, other fields", " \n[ {\"id\":\"x\",\"conversations\":[{\"from\":\"human\",\"value\":\"p\",\"markdown\":null},{\"value\":\"r\",\"from\":\"gpt\"}],\"extra\":[1,{}]} ]\n",
			&ShareGPT{Exchanges: []Exchange{{0, "p", "r"}}, Conversations: 1}},
		{"short and unanswered skipped", `[{"conversations":[{"from":"human","value":"a"}]},{},{"conversations":null},` +
			`{"conversations":[{"from":"human","value":"a"},{"from":"human","value":"b"},{"from":"gpt","value":"c"}]},` +
			`{"conversations":[{"from":"gpt","value":"a"},{"from":"gpt","value":"b"}]},` +
			`{"conversations":[{"from":"gpt","value":"a"},{"from":"human","value":"b"}]},` + hg + `]`,
			&ShareGPT{Exchanges: []Exchange{{6, "p", "r"}}, Conversations: 7, Short: 3, Unanswered: 3}},
		{"first human after others", `[{"conversations":[{"from":"system","value":"s"},{"from":"gpt","value":"g"},{"from":"human","value":"p"},{"from":"gpt","value":"r"},{"from":"human","value":"q"},{"from":"gpt","value":"t"}]}]`,
			&ShareGPT{Exchanges: []Exchange{{0, "p", "r"}}, Conversations: 1}},
		{"roles are exact", `[{"conversations":[{"from":"user","value":"a"},{"from":"assistant","value":"b"}]},` + hg + `]`,
			&ShareGPT{Exchanges: []Exchange{{1, "p", "r"}}, Conversations: 2, Unanswered: 1}},
		{"escapes and Unicode", `[{"conversations":[{"from":"human","value":"\u00e9\n\"q\" ü"},{"from":"gpt","value":"\ud83d\ude00"}]}]`,
			&ShareGPT{Exchanges: []Exchange{{0, "é\n\"q\" ü", "😀"}}, Conversations: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := ReadShareGPT(strings.NewReader(c.in), "d.json")
			require.NoError(t, err)
			c.want.Name = "d.json"
			assert.Equal(t, c.want, d)
		})
	}
}

func TestReadShareGPTErrors(t *testing.T) {
	const hg = `{"conversations":[{"from":"human","value":"p"},{"from":"gpt","value":"r"}]}`
	for _, c := range []struct{ name, in, want string }{
		{"empty", " \n", "d.json: bad dataset: empty file"},
		{"not JSON", "nope", "d.json: bad dataset: not JSON: invalid character 'o'"},
		{"object", hg, "d.json: bad dataset: not a JSON array of conversations"},
		{"JSONL", `{"prompt":"a","output_tokens":3}` + "\n", "belong in a .jsonl file"},
		{"entry not an object", "[" + hg + ",3]", "d.json: entry 1: bad dataset: a JSON number, not an object"},
		{"conversations not an array", `[{"conversations":"hi"}]`, `d.json: entry 0: bad dataset: "conversations" is a JSON string, not an array`},
		{"turn not an object", `[` + hg + `,` + hg + `,{"conversations":["hi","there"]}]`, `d.json: entry 2: bad dataset: a turn of "conversations" is a JSON string, not an object`},
		{"no value", `[{"conversations":[{"from":"human","value":"p"},{"from":"gpt"}]}]`, `d.json: entry 0: turn 1: bad dataset: no "value"`},
		{"null value", `[` + hg + `,{"conversations":[{"from":"human","value":null}]}]`, `d.json: entry 1: turn 0: bad dataset: "value" is not a string`},
		{"number value", `[{"conversations":[{"from":"human","value":7},{"from":"gpt","value":"r"}]}]`, `entry 0: turn 0: bad dataset: "value" is not a string`},
		{"no from", `[{"conversations":[{"value":"p"},{"from":"gpt","value":"r"}]}]`, `d.json: entry 0: turn 0: bad dataset: no "from"`},
		{"unused turn checked", `[{"conversations":[{"from":"human","value":"p"},{"from":"gpt","value":"r"},{"from":"human","value":[]}]}]`, `entry 0: turn 2: bad dataset: "value" is not a string`},
		{"bad UTF-8 in value", "[" + hg + ",{\"conversations\":[{\"from\":\"human\",\"value\":\"a\xffb\"},{\"from\":\"gpt\",\"value\":\"r\"}]}]", `d.json: entry 1: turn 0: bad dataset: "value" is not valid UTF-8`},
		{"bad UTF-8 in from", "[{\"conversations\":[{\"from\":\"hu\xc3man\",\"value\":\"p\"}]}]", `d.json: entry 0: turn 0: bad dataset: "from" is not valid UTF-8`},
		{"missing comma", "[" + hg + " " + hg + "]", "d.json: entry 1: bad dataset: expected comma after array element"},
		{"trailing comma", "[" + hg + ",]", "d.json: entry 1: bad dataset: invalid character ']' looking for beginning of value (at byte"},
		{"truncated entry", `[` + hg + `,{"conversations":[{"from":"hu`, "d.json: entry 1: bad dataset: the file ends before the array's closing ']': unexpected EOF"},
		{"truncated array", "[" + hg, "d.json: entry 1: bad dataset: the file ends before the array's closing ']'"},
		{"only a bracket", "[", "d.json: entry 0: bad dataset: the file ends before the array's closing ']'"},
		{"more after the array", "[" + hg + "] []", "d.json: bad dataset: more after the array"},
		{"empty array", "[]", "d.json: bad dataset: no usable conversation: of 0, 0 have fewer than two turns, 0 no human turn answered by a gpt turn"},
		{"none usable", `[{"conversations":[]},{"conversations":[{"from":"gpt","value":"a"},{"from":"human","value":"b"}]}]`,
			"d.json: bad dataset: no usable conversation: of 2, 1 have fewer than two turns, 1 no human turn"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := ReadShareGPT(strings.NewReader(c.in), "d.json")
			require.ErrorIs(t, err, ErrDataset)
			assert.Nil(t, d)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err := ReadShareGPT(strings.NewReader("[{}"), "d.json")
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = ReadShareGPT(strings.NewReader("[{}}"), "d.json")
	var se *json.SyntaxError
	assert.ErrorAs(t, err, &se)
}

// TestShareGPTSampleFilter checks the token limits against a direct
// reading of vLLM's is_valid_sequence, for the defaults and for others.
func TestShareGPTSampleFilter(t *testing.T) {
	d := readSmall(t)
	for _, c := range []struct {
		name string
		lim  ShareGPTLimits
		want int
	}{
		{"defaults", DefaultShareGPTLimits, 21}, // zb-06, 07, 20 and 25 are under 4 tokens
		{"min 2", ShareGPTLimits{MinTokens: 2, MaxPrompt: 1024, MaxTotal: 2048}, 25},
		{"min 10", ShareGPTLimits{MinTokens: 10, MaxPrompt: 1024, MaxTotal: 2048}, 18},
		{"prompt ≤ 10", ShareGPTLimits{MinTokens: 4, MaxPrompt: 10, MaxTotal: 2048}, 5},
		{"total ≤ 30", ShareGPTLimits{MinTokens: 4, MaxPrompt: 1024, MaxTotal: 30}, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			var want []Item
			for _, ex := range d.Exchanges {
				p, o := wordCount(ex.Prompt), wordCount(ex.Reply)
				if !(p < c.lim.MinTokens || o < c.lim.MinTokens || p > c.lim.MaxPrompt || p+o > c.lim.MaxTotal) {
					want = append(want, Item{ex.Prompt, o})
				}
			}
			items, err := d.Sample(0, 1, wordCount, c.lim)
			require.NoError(t, err)
			assert.ElementsMatch(t, want, items)
			assert.Len(t, items, c.want)
			for _, it := range items {
				require.NoError(t, it.check())
			}
		})
	}
	_, err := d.Sample(0, 1, wordCount, ShareGPTLimits{MinTokens: 100, MaxPrompt: 1024, MaxTotal: 2048})
	require.ErrorIs(t, err, ErrDataset)
	assert.Contains(t, err.Error(), "sharegpt-small.json: bad dataset: none of 25 conversations within the limits: prompt and reply ≥ 100 tokens, prompt ≤ 1024, both ≤ 2048")
	for _, lim := range []ShareGPTLimits{{}, {0, 10, 20}, {4, 3, 20}, {4, 10, 7}, {4, 10, maxOutputTokens + 1}} {
		_, err := d.Sample(0, 1, wordCount, lim)
		assert.ErrorIs(t, err, ErrDataset, "%+v", lim)
	}
}

// TestShareGPTSampleSeeded checks that a sample is a seeded shuffle: the
// same for a seed, another order for another, n of them a prefix of all
// of them, and the tokenizer asked only about what is looked at.
func TestShareGPTSampleSeeded(t *testing.T) {
	d := readSmall(t)
	all, err := d.Sample(0, 7, wordCount, DefaultShareGPTLimits)
	require.NoError(t, err)
	require.Len(t, all, 21)
	again, err := d.Sample(100, 7, wordCount, DefaultShareGPTLimits)
	require.NoError(t, err)
	assert.Equal(t, all, again, "seeded; more asked for than there are gives them all")
	other, err := d.Sample(0, 8, wordCount, DefaultShareGPTLimits)
	require.NoError(t, err)
	assert.NotEqual(t, all, other)
	assert.ElementsMatch(t, all, other)

	calls := 0
	counting := func(s string) int { calls++; return wordCount(s) }
	five, err := d.Sample(5, 7, counting, DefaultShareGPTLimits)
	require.NoError(t, err)
	assert.Equal(t, all[:5], five)
	assert.LessOrEqual(t, calls, 2*9, "five taken of the first few looked at, four being too short")

	var inFile []Item
	for _, ex := range d.Exchanges {
		if o := wordCount(ex.Reply); wordCount(ex.Prompt) >= 4 && o >= 4 {
			inFile = append(inFile, Item{ex.Prompt, o})
		}
	}
	assert.NotEqual(t, inFile, all, "shuffled")
}

// FuzzReadShareGPT checks that any file is read or refused with
// ErrDataset naming the file, that what is read samples into valid
// requests, and that a file written from what was read reads back the
// same.
func FuzzReadShareGPT(f *testing.F) {
	f.Add([]byte(`[{"id":"a","conversations":[{"from":"human","value":"a b c d"},{"from":"gpt","value":"e f g h"}]},` +
		`{"conversations":[{"from":"gpt","value":"x"},{"from":"human","value":"a b"},{"from":"gpt","value":"c d"}]},{"conversations":[]}]`))
	f.Add([]byte(`[{"conversations":[{"from":"system","value":""},{"from":"human","value":"\u0000 x y z"},{"from":"gpt","value":"\ud800 1 2 3"}]},{}]`))
	f.Add([]byte("[{\"conversations\":[{\"from\":\"human\",\"value\":\"\xff\"}]}]"))
	f.Add([]byte(`[{"conversations":[{"from":"human","value":"p"},{"from":"gpt"`))
	f.Add([]byte(`{"prompt":"a","output_tokens":3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ReadShareGPT(bytes.NewReader(data), "f.json")
		if err != nil {
			require.ErrorIs(t, err, ErrDataset)
			require.True(t, strings.HasPrefix(err.Error(), "f.json: "), "%v", err)
			return
		}
		require.NotEmpty(t, d.Exchanges)
		require.Equal(t, d.Conversations, len(d.Exchanges)+d.Short+d.Unanswered)
		type turn struct {
			From  string `json:"from"`
			Value string `json:"value"`
		}
		var entries []map[string][]turn
		for _, ex := range d.Exchanges {
			entries = append(entries, map[string][]turn{"conversations": {{"human", ex.Prompt}, {"gpt", ex.Reply}}})
		}
		out, err := json.Marshal(entries)
		require.NoError(t, err)
		back, err := ReadShareGPT(bytes.NewReader(out), "f.json")
		require.NoError(t, err)
		for i := range back.Exchanges {
			back.Exchanges[i].Entry = d.Exchanges[i].Entry
		}
		assert.Equal(t, d.Exchanges, back.Exchanges)

		items, err := d.Sample(3, 1, wordCount, ShareGPTLimits{MinTokens: 1, MaxPrompt: 1024, MaxTotal: 2048})
		if err != nil {
			require.ErrorIs(t, err, ErrDataset)
			return
		}
		require.NotEmpty(t, items)
		require.LessOrEqual(t, len(items), 3)
		for _, it := range items {
			require.NoError(t, it.check())
		}
	})
}
