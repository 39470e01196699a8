package imagenet

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrLabels marks a malformed labels file.
var ErrLabels = errors.New("malformed labels")

// maxLabelLine is the longest line ParseLabels reads, in bytes.
const maxLabelLine = 1 << 16

// ReadLabels reads the labels file at path (see ParseLabels). Errors name
// path.
func ReadLabels(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("imagenet: %w", err)
	}
	defer f.Close()
	labels, err := parseLabels(f)
	if err != nil {
		return nil, fmt.Errorf("imagenet: labels %q: %w", path, err)
	}
	return labels, nil
}

// ParseLabels reads class names, one a line, in class order (line 1 is
// class 0), as in the imagenet_classes.txt files of PyTorch's examples.
// Surrounding white space (a CRLF line end's CR too) is dropped; duplicate
// names are kept (ImageNet has two "crane" and two "maillot" classes). Blank
// lines after the last name are ignored, but a blank line between names, an
// empty file, a name that is not UTF-8 and a line longer than 64 KiB are
// errors wrapping ErrLabels that give the line number.
func ParseLabels(r io.Reader) ([]string, error) {
	labels, err := parseLabels(r)
	if err != nil {
		return nil, fmt.Errorf("imagenet: labels: %w", err)
	}
	return labels, nil
}

// parseLabels is ParseLabels without the prefix of its errors.
func parseLabels(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLabelLine)
	var labels []string
	blank := 0 // the first blank line since the last name, or 0
	line := 0
	for sc.Scan() {
		line++
		name := strings.TrimSpace(sc.Text())
		if name == "" {
			if blank == 0 {
				blank = line
			}
			continue
		}
		if blank != 0 {
			return nil, fmt.Errorf("line %d is blank (class %d has no name): %w", blank, len(labels), ErrLabels)
		}
		if !utf8.ValidString(name) {
			return nil, fmt.Errorf("line %d: class name %q is not UTF-8: %w", line, name, ErrLabels)
		}
		labels = append(labels, name)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d is longer than %d bytes: %w", line+1, maxLabelLine, ErrLabels)
		}
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if len(labels) == 0 {
		return nil, fmt.Errorf("no class names: %w", ErrLabels)
	}
	return labels, nil
}

// Prediction is one class of a classifier's output: its index and its
// softmax probability.
type Prediction struct {
	Index int
	Prob  float64
}

// TopK returns the k classes of highest logit, best first, ties going to
// the lower index, with their probabilities under the softmax of all the
// logits, computed in float64. k larger than len(logits) is taken as
// len(logits). Errors: no logits, k < 1, or a logit that is NaN or
// infinite (the softmax would not be a number).
func TopK(logits []float32, k int) ([]Prediction, error) {
	if len(logits) == 0 {
		return nil, errors.New("imagenet: top-k of no logits")
	}
	if k < 1 {
		return nil, fmt.Errorf("imagenet: top-k with k = %d, want k >= 1", k)
	}
	maxLogit := math.Inf(-1)
	for i, v := range logits {
		x := float64(v)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("imagenet: top-k: logit %d is %v", i, v)
		}
		maxLogit = max(maxLogit, x)
	}
	sum := 0.0
	for _, v := range logits {
		sum += math.Exp(float64(v) - maxLogit)
	}
	order := make([]int, len(logits))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(logits[b], logits[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	k = min(k, len(logits))
	out := make([]Prediction, k)
	for i, idx := range order[:k] {
		out[i] = Prediction{Index: idx, Prob: math.Exp(float64(logits[idx])-maxLogit) / sum}
	}
	return out, nil
}
