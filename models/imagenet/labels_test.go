package imagenet_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/imagenet"
)

func TestParseLabels(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string
		err   string // part of the error message; "" for none
	}{
		{"trailing newline", "tench, Tinca tinca\ngoldfish\n", []string{"tench, Tinca tinca", "goldfish"}, ""},
		{"no trailing newline", "a\nb", []string{"a", "b"}, ""},
		{"CRLF", "a\r\nb\r\n", []string{"a", "b"}, ""},
		{"trailing blank lines", "a\nb\n\n \n", []string{"a", "b"}, ""},
		{"surrounding spaces", "  a b \n\tc\n", []string{"a b", "c"}, ""},
		{"duplicates kept", "crane\nx\ncrane\n", []string{"crane", "x", "crane"}, ""},
		{"one label", "only", []string{"only"}, ""},
		{"UTF-8", "café\n", []string{"café"}, ""},
		{"empty", "", nil, "no class names"},
		{"blank only", "\n\n", nil, "no class names"},
		{"leading blank line", "\na\n", nil, "line 1 is blank (class 0 has no name)"},
		{"blank line inside", "a\nb\n\nc\n", nil, "line 3 is blank (class 2 has no name)"},
		{"spaces line inside", "a\n   \nc\n", nil, "line 2 is blank"},
		{"not UTF-8", "a\n\xff\xfe\n", nil, "line 2: class name \"\\xff\\xfe\" is not UTF-8"},
		{"line too long", "a\n" + strings.Repeat("x", 1<<17) + "\n", nil, "line 2 is longer than 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := imagenet.ParseLabels(strings.NewReader(tt.input))
			if tt.err == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.ErrorIs(t, err, imagenet.ErrLabels)
			assert.Contains(t, err.Error(), tt.err)
			assert.Nil(t, got)
		})
	}
}

func TestReadLabels(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "imagenet_classes.txt")
	require.NoError(t, os.WriteFile(good, []byte("tench\ngoldfish\ngreat white shark\n"), 0o644))
	labels, err := imagenet.ReadLabels(good)
	require.NoError(t, err)
	assert.Equal(t, []string{"tench", "goldfish", "great white shark"}, labels)

	bad := filepath.Join(dir, "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte("a\n\nb\n"), 0o644))
	_, err = imagenet.ReadLabels(bad)
	require.ErrorIs(t, err, imagenet.ErrLabels)
	assert.Contains(t, err.Error(), bad)
	assert.Contains(t, err.Error(), "line 2")

	missing := filepath.Join(dir, "missing.txt")
	_, err = imagenet.ReadLabels(missing)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), missing)
}

func TestTopK(t *testing.T) {
	ln3 := float32(math.Log(3))
	tests := []struct {
		name   string
		logits []float32
		k      int
		want   []imagenet.Prediction
	}{
		{"two classes", []float32{0, ln3}, 2, []imagenet.Prediction{{1, 0.75}, {0, 0.25}}},
		{"k = 1", []float32{0, ln3}, 1, []imagenet.Prediction{{1, 0.75}}},
		{"k past the end", []float32{0, ln3}, 5, []imagenet.Prediction{{1, 0.75}, {0, 0.25}}},
		{"ties by lower index", []float32{1, 2, 2, 1}, 4, []imagenet.Prediction{{1, 0}, {2, 0}, {0, 0}, {3, 0}}},
		{"large logits", []float32{1000, 1000}, 2, []imagenet.Prediction{{0, 0.5}, {1, 0.5}}},
		{"negative zero ties", []float32{float32(math.Copysign(0, -1)), 0}, 2, []imagenet.Prediction{{0, 0.5}, {1, 0.5}}},
		{"one class", []float32{-3}, 1, []imagenet.Prediction{{0, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := imagenet.TopK(tt.logits, tt.k)
			require.NoError(t, err)
			require.Len(t, got, len(tt.want))
			for i := range got {
				assert.Equal(t, tt.want[i].Index, got[i].Index, "rank %d", i)
				if tt.want[i].Prob != 0 {
					assert.InDelta(t, tt.want[i].Prob, got[i].Prob, 1e-7, "rank %d", i)
				}
			}
		})
	}
}

// TestTopKSoftmax checks the probabilities against a direct float64
// softmax, and that all of them sum to one.
func TestTopKSoftmax(t *testing.T) {
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)*0.37) * 9)
	}
	got, err := imagenet.TopK(logits, len(logits))
	require.NoError(t, err)
	sum, direct := 0.0, 0.0
	for _, v := range logits {
		direct += math.Exp(float64(v))
	}
	for i, p := range got {
		sum += p.Prob
		assert.InEpsilon(t, math.Exp(float64(logits[p.Index]))/direct, p.Prob, 1e-12)
		if i > 0 {
			require.GreaterOrEqual(t, logits[got[i-1].Index], logits[p.Index])
		}
	}
	assert.InDelta(t, 1, sum, 1e-12)
}

func TestTopKErrors(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	tests := []struct {
		name   string
		logits []float32
		k      int
		err    string
	}{
		{"no logits", nil, 1, "no logits"},
		{"k = 0", []float32{1}, 0, "k = 0"},
		{"NaN", []float32{1, nan}, 1, "logit 1 is NaN"},
		{"+Inf", []float32{inf, 1}, 1, "logit 0 is +Inf"},
		{"-Inf", []float32{1, -inf}, 1, "logit 1 is -Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := imagenet.TopK(tt.logits, tt.k)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
			assert.Nil(t, got)
		})
	}
}
