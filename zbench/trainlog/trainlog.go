// Package trainlog reads training logs: JSON lines, one object per logged
// step with at least an integer "step" and a finite number "loss", as
// zbench finetune --log and the training tests write them:
//
//	{"step":1,"loss":8.31,"lr":2e-05,"grad_norm":1.9}
//	{"step":2,"loss":8.05,"lr":4e-05,"grad_norm":1.7}
//
// Other fields are ignored. Steps start anywhere from 0 and increase
// strictly; they need not be consecutive (a log may keep every tenth step).
// Blank lines are skipped. Anything else is an error naming the file and
// line, so that a corrupt log never gives a silently wrong curve.
package trainlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
)

// ErrNoSteps is wrapped by the error for a log without a single step: an
// empty file, or one of blank lines only.
var ErrNoSteps = errors.New("no training steps")

// ErrInvalid is wrapped by the error for a line that is not a valid step:
// not a JSON object, or a step or loss that is missing or out of range.
var ErrInvalid = errors.New("invalid training log")

// A Point is one logged step.
type Point struct {
	// Step is the step number, ≥ 0.
	Step int
	// Loss is the training loss at Step, finite.
	Loss float64
}

// A Log is the loss curve of one training run.
type Log struct {
	// Path is the file's name as given to Read or Parse.
	Path string
	// Points are the logged steps in file order, so by increasing Step;
	// a Log from Read or Parse has at least one.
	Points []Point
}

// First returns the first logged step.
func (l *Log) First() Point { return l.Points[0] }

// Last returns the last logged step.
func (l *Log) Last() Point { return l.Points[len(l.Points)-1] }

// TailMean returns the mean loss of the last n logged steps, of all of
// them when the log has fewer, and the number of steps averaged. It
// returns NaN and 0 for an empty log or n ≤ 0.
func (l *Log) TailMean(n int) (mean float64, used int) {
	n = min(n, len(l.Points))
	if n <= 0 {
		return math.NaN(), 0
	}
	// Each term divided first, so that finite losses give a finite mean.
	for _, p := range l.Points[len(l.Points)-n:] {
		mean += p.Loss / float64(n)
	}
	return mean, n
}

// Read reads the training log at path.
func Read(path string) (*Log, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse(data, path)
}

// Parse reads a training log from r; name is the file name used in the
// Log and in errors. An error about a line is "name:line: message" and
// wraps ErrInvalid; a log without steps gives an error wrapping
// ErrNoSteps.
func Parse(r io.Reader, name string) (*Log, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return parse(data, name)
}

func parse(data []byte, name string) (*Log, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	l := &Log{Path: name}
	n := 0
	for line := range bytes.Lines(data) {
		n++
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		p, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if len(l.Points) > 0 {
			if prev := l.Last().Step; p.Step <= prev {
				return nil, fmt.Errorf("%s:%d: step %d after step %d: steps must increase: %w", name, n, p.Step, prev, ErrInvalid)
			}
		}
		l.Points = append(l.Points, p)
	}
	if len(l.Points) == 0 {
		return nil, fmt.Errorf("%s: empty file: %w", name, ErrNoSteps)
	}
	return l, nil
}

// nonFinite matches a loss of NaN or an infinity as Python's json module
// (NaN, Infinity) or Go's %g verb (NaN, +Inf) writes it, which is not
// JSON, so that such a line gets a clearer error than a syntax error.
var nonFinite = regexp.MustCompile(`"loss"\s*:\s*([+-]?(?:Inf(?:inity)?|NaN))`)

// parseLine parses one non-blank line.
func parseLine(line []byte) (Point, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		if m := nonFinite.FindSubmatch(line); m != nil {
			return Point{}, fmt.Errorf("loss is %s, not a finite number: %w", m[1], ErrInvalid)
		}
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return Point{}, fmt.Errorf("not a JSON object but a JSON %s: %w", typ.Value, ErrInvalid)
		}
		return Point{}, fmt.Errorf("malformed JSON: %w: %w", err, ErrInvalid)
	}
	if fields == nil {
		return Point{}, fmt.Errorf("not a JSON object but null: %w", ErrInvalid)
	}
	step, err := number(fields, "step")
	if err != nil {
		return Point{}, err
	}
	s, err := strconv.ParseInt(step.String(), 10, 0)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return Point{}, fmt.Errorf("step %s out of range: %w", step, ErrInvalid)
	case err != nil:
		return Point{}, fmt.Errorf("step %s is not an integer: %w", step, ErrInvalid)
	case s < 0:
		return Point{}, fmt.Errorf("step %d is negative: %w", s, ErrInvalid)
	}
	loss, err := number(fields, "loss")
	if err != nil {
		return Point{}, err
	}
	v, err := strconv.ParseFloat(loss.String(), 64)
	if err != nil || math.IsInf(v, 0) {
		// JSON's grammar leaves only overflow, such as 1e999.
		return Point{}, fmt.Errorf("loss %s is not a finite float64: %w", loss, ErrInvalid)
	}
	return Point{Step: int(s), Loss: v}, nil
}

// number returns field k of an object as a JSON number.
func number(fields map[string]json.RawMessage, k string) (json.Number, error) {
	raw, ok := fields[k]
	if !ok {
		return "", fmt.Errorf("no %q field: %w", k, ErrInvalid)
	}
	// raw is one valid JSON value: json.Unmarshal checked the line.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("%s: %w: %w", k, err, ErrInvalid)
	}
	n, ok := v.(json.Number)
	if !ok {
		return "", fmt.Errorf("%s is %s, not a number: %w", k, jsonKind(v), ErrInvalid)
	}
	return n, nil
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case string:
		if len(v) > 20 {
			return "a string"
		}
		return "a string " + strconv.Quote(v)
	case []any:
		return "an array"
	}
	return "an object"
}
