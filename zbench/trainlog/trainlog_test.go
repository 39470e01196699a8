package trainlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// finetuneLine is a line as zbench finetune --log writes it.
const finetuneLine = `{"step":%d,"loss":%g,"lr":0.0002,"grad_norm":1.25,"tokens":2048,"step_ms":812.5,"tok_s":2520.6,"epoch":0}` + "\n"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want []Point
	}{
		{"bert test", `{"step":0,"loss":8.31}` + "\n" + `{"step":1,"loss":8.05}` + "\n", []Point{{0, 8.31}, {1, 8.05}}},
		{"finetune", fmt.Sprintf(finetuneLine+finetuneLine, 1, 2.5, 2, 2.25), []Point{{1, 2.5}, {2, 2.25}}},
		{"no final newline", `{"step":3,"loss":1}`, []Point{{3, 1}}},
		{"every tenth step", `{"step":0,"loss":3}` + "\n" + `{"step":10,"loss":2}` + "\n" + `{"step":20,"loss":1}`, []Point{{0, 3}, {10, 2}, {20, 1}}},
		{"blank lines and CRLF", "\r\n" + `{"step":1,"loss":2}` + "\r\n\n  \n" + `{"step":2,"loss":1.5}` + "\r\n\n", []Point{{1, 2}, {2, 1.5}}},
		{"byte order mark", "\ufeff" + `{"step":1,"loss":2}`, []Point{{1, 2}}},
		{"fields in any order, spaces", `{ "loss" : -0.5e-3 , "note": "warm-up", "step" : 7 }`, []Point{{7, -0.5e-3}}},
		{"other fields of any type", `{"step":1,"loss":0,"lr":null,"tags":["a"],"opt":{"beta":0.9},"ok":true}`, []Point{{1, 0}}},
		{"duplicate key: the last wins", `{"step":1,"loss":5,"loss":4}`, []Point{{1, 4}}},
		{"integer loss, large step", `{"step":9007199254740993,"loss":1}`, []Point{{9007199254740993, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Parse(strings.NewReader(tc.text), "run/bf16.jsonl")
			require.NoError(t, err)
			assert.Equal(t, "run/bf16.jsonl", l.Path)
			assert.Equal(t, tc.want, l.Points)
		})
	}
}

func TestParseErrors(t *testing.T) {
	const name = "run/fp8.jsonl"
	good := `{"step":0,"loss":8.31}` + "\n"
	for _, tc := range []struct {
		name    string
		text    string
		wantErr string // the whole message
		is      error
	}{
		{"empty", "", name + ": empty file: no training steps", ErrNoSteps},
		{"blank lines only", "\n \r\n\t\n", name + ": empty file: no training steps", ErrNoSteps},
		{"not JSON", good + "step 1 loss 8.0\n", name + ":2: malformed JSON: invalid character 's' looking for beginning of value: invalid training log", ErrInvalid},
		{"truncated line", good + `{"step":1,"lo`, name + ":2: malformed JSON: unexpected end of JSON input: invalid training log", ErrInvalid},
		{"two objects on a line", `{"step":0,"loss":1} {"step":1,"loss":1}`, name + ":1: malformed JSON: invalid character '{' after top-level value: invalid training log", ErrInvalid},
		{"array", "[0, 8.31]", name + ":1: not a JSON object but a JSON array: invalid training log", ErrInvalid},
		{"number", "8.31", name + ":1: not a JSON object but a JSON number: invalid training log", ErrInvalid},
		{"null", "null", name + ":1: not a JSON object but null: invalid training log", ErrInvalid},
		{"missing loss", good + `{"step":1,"lr":0.1}`, name + `:2: no "loss" field: invalid training log`, ErrInvalid},
		{"missing step", `{"loss":1}`, name + `:1: no "step" field: invalid training log`, ErrInvalid},
		{"loss is not case-folded", `{"step":0,"Loss":1}`, name + `:1: no "loss" field: invalid training log`, ErrInvalid},
		{"null loss", `{"step":0,"loss":null}`, name + ":1: loss is null, not a number: invalid training log", ErrInvalid},
		{"string loss", `{"step":0,"loss":"8.3"}`, name + `:1: loss is a string "8.3", not a number: invalid training log`, ErrInvalid},
		{"string nan", `{"step":0,"loss":"nan"}`, name + `:1: loss is a string "nan", not a number: invalid training log`, ErrInvalid},
		{"bool loss", `{"step":0,"loss":true}`, name + ":1: loss is true, not a number: invalid training log", ErrInvalid},
		{"Python NaN", good + `{"step": 1, "loss": NaN}`, name + ":2: loss is NaN, not a finite number: invalid training log", ErrInvalid},
		{"Python -Infinity", `{"step": 0, "loss": -Infinity}`, name + ":1: loss is -Infinity, not a finite number: invalid training log", ErrInvalid},
		{"Go %g NaN", `{"step":0,"loss":NaN}`, name + ":1: loss is NaN, not a finite number: invalid training log", ErrInvalid},
		{"Go %g +Inf", `{"step":0,"loss":+Inf}`, name + ":1: loss is +Inf, not a finite number: invalid training log", ErrInvalid},
		{"Go %g -Inf", `{"step":0,"loss":-Inf}`, name + ":1: loss is -Inf, not a finite number: invalid training log", ErrInvalid},
		{"overflowing loss", `{"step":0,"loss":1e999}`, name + ":1: loss 1e999 is not a finite float64: invalid training log", ErrInvalid},
		{"negative step", `{"step":-1,"loss":1}`, name + ":1: step -1 is negative: invalid training log", ErrInvalid},
		{"fractional step", `{"step":1.5,"loss":1}`, name + ":1: step 1.5 is not an integer: invalid training log", ErrInvalid},
		{"float step", `{"step":1.0,"loss":1}`, name + ":1: step 1.0 is not an integer: invalid training log", ErrInvalid},
		{"huge step", `{"step":1e30,"loss":1}`, name + ":1: step 1e30 is not an integer: invalid training log", ErrInvalid},
		{"step out of range", `{"step":99999999999999999999,"loss":1}`, name + ":1: step 99999999999999999999 out of range: invalid training log", ErrInvalid},
		{"string step", `{"step":"1","loss":1}`, name + `:1: step is a string "1", not a number: invalid training log`, ErrInvalid},
		{"repeated step", good + "\n" + `{"step":0,"loss":8.2}`, name + ":3: step 0 after step 0: steps must increase: invalid training log", ErrInvalid},
		{"decreasing step", `{"step":5,"loss":1}` + "\n" + `{"step":6,"loss":1}` + "\n" + `{"step":2,"loss":1}`, name + ":3: step 2 after step 6: steps must increase: invalid training log", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Parse(strings.NewReader(tc.text), name)
			require.Error(t, err)
			assert.Nil(t, l)
			assert.Equal(t, tc.wantErr, err.Error())
			assert.ErrorIs(t, err, tc.is)
		})
	}
}

func TestReadErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	_, err := Read(missing)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), missing)

	boom := errors.New("disk on fire")
	_, err = Parse(iotest.ErrReader(boom), "x.jsonl")
	require.ErrorIs(t, err, boom)
	assert.Equal(t, "x.jsonl: disk on fire", err.Error())
}

func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fp8.jsonl")
	var text strings.Builder
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&text, finetuneLine, i, float64(20-i))
	}
	require.NoError(t, os.WriteFile(path, []byte(text.String()), 0o644))
	l, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, path, l.Path)
	require.Len(t, l.Points, 12)
	assert.Equal(t, Point{1, 19}, l.First())
	assert.Equal(t, Point{12, 8}, l.Last())

	// The mean of losses 17, 16, …, 8.
	mean, n := l.TailMean(10)
	assert.Equal(t, 10, n)
	assert.InDelta(t, 12.5, mean, 1e-12)
	mean, n = l.TailMean(100)
	assert.Equal(t, 12, n)
	assert.InDelta(t, 13.5, mean, 1e-12)
	mean, n = l.TailMean(0)
	assert.Equal(t, 0, n)
	assert.True(t, math.IsNaN(mean))
	mean, n = (&Log{}).TailMean(10)
	assert.Equal(t, 0, n)
	assert.True(t, math.IsNaN(mean))
}

// FuzzParse: any input gives a valid log or one error naming the file,
// never a panic; a log written back as JSON lines reads the same.
func FuzzParse(f *testing.F) {
	f.Add(`{"step":0,"loss":8.31}` + "\n" + `{"step":1,"loss":8.05}` + "\n")
	f.Add(fmt.Sprintf(finetuneLine+finetuneLine, 1, 2.5, 2, 2.25))
	f.Add("")
	f.Add("\ufeff\r\n")
	f.Add(`{"step":1,"loss":NaN}`)
	f.Add(`{"step":-1,"loss":1e999}`)
	f.Add(`{"step":2,"loss":1}` + "\n" + `{"step":2,"loss":1}`)
	f.Add(`{"step":1.0,"loss":"1","STEP":3}`)
	f.Add(`[{"step":0,"loss":0}]`)
	f.Fuzz(func(t *testing.T, data string) {
		l, err := Parse(strings.NewReader(data), "fuzz.jsonl")
		if err != nil {
			require.Nil(t, l)
			require.True(t, errors.Is(err, ErrInvalid) || errors.Is(err, ErrNoSteps), "%v", err)
			require.True(t, strings.HasPrefix(err.Error(), "fuzz.jsonl:"), "%v", err)
			return
		}
		require.NotEmpty(t, l.Points)
		var text strings.Builder
		for i, p := range l.Points {
			require.GreaterOrEqual(t, p.Step, 0)
			require.False(t, math.IsNaN(p.Loss) || math.IsInf(p.Loss, 0), "loss %v", p.Loss)
			if i > 0 {
				require.Greater(t, p.Step, l.Points[i-1].Step)
			}
			line, err := json.Marshal(map[string]any{"step": p.Step, "loss": p.Loss})
			require.NoError(t, err)
			text.Write(append(line, '\n'))
		}
		again, err := Parse(strings.NewReader(text.String()), "again.jsonl")
		require.NoError(t, err)
		require.Equal(t, l.Points, again.Points)
		mean, n := l.TailMean(10)
		require.Equal(t, min(10, len(l.Points)), n)
		require.False(t, math.IsNaN(mean) || math.IsInf(mean, 0), "mean %v", mean)
	})
}
