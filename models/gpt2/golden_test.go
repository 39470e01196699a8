package gpt2_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/gpt2"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/zbench"
)

// Files written by testdata/reference/gpt2.py (make golden).
const (
	golden  = "../../testdata/golden/gpt2.safetensors"
	tinyDir = "../../testdata/golden/gpt2-tiny"
)

// precisions are the precisions the model runs in, with the relative
// error of the logits each must reach against the float64 reference.
var precisions = []struct {
	p   nn.Precision
	tol float64
}{{nn.F32, 1e-4}, {nn.F16, 1e-2}, {nn.BF16, kernels.Tolerance(kernels.BF16)}}

// goldenCase is one case of the golden file.
type goldenCase struct {
	Name      string
	Config    json.RawMessage `json:"config"`
	Weights   string          `json:"weights"`
	Seed      uint64          `json:"seed"`
	Positions string          `json:"positions"` // all, or last: logits holds the last position's only

	Batch, Seq int
	In         map[string]nn.Values
	Logits     []float32
}

// loadCases reads every case of the golden file.
func loadCases(t testing.TB) []*goldenCase {
	t.Helper()
	f, err := safetensors.Open(golden)
	require.NoError(t, err)
	var cases []*goldenCase
	for key, val := range f.Metadata() {
		if key == "format" || key == "reference" || key == "script" {
			continue
		}
		c := &goldenCase{Name: key, In: map[string]nn.Values{}}
		require.NoError(t, json.Unmarshal([]byte(val), c), key)
		for _, role := range []string{"input_ids", "attention_mask"} {
			x, err := f.Tensor(key + "/" + role)
			require.NoError(t, err)
			v, err := x.Int32()
			require.NoError(t, err)
			c.In[role] = nn.Values{Shape: x.Shape, I32: v}
		}
		c.Batch, c.Seq = c.In["input_ids"].Shape[0], c.In["input_ids"].Shape[1]
		x, err := f.Tensor(key + "/logits")
		require.NoError(t, err)
		c.Logits, err = x.Float32()
		require.NoError(t, err)
		cases = append(cases, c)
	}
	require.NotEmpty(t, cases)
	return cases
}

// source returns the case's config and weights.
func (c *goldenCase) source(t testing.TB) (gpt2.Config, nn.Source) {
	t.Helper()
	cfg, err := gpt2.ParseConfig(c.Name, c.Config)
	require.NoError(t, err)
	if c.Weights == "synthetic" {
		return cfg, gpt2.Synthetic(c.Seed)
	}
	src, err := gpt2.OpenCheckpoint(filepath.Join("../..", c.Weights, "model.safetensors"))
	require.NoError(t, err)
	return cfg, src
}

// relErr returns the relative error and max-abs difference of the logits
// of every position, [batch, seq, vocab], against the case's (its last
// positions' only where the case holds those).
func (c *goldenCase) relErr(got []float32, vocab int) (rel, maxAbs float64) {
	if c.Positions == "last" {
		var last []float32
		for b := range c.Batch {
			last = append(last, got[((b+1)*c.Seq-1)*vocab:][:vocab]...)
		}
		got = last
	}
	return kernels.RelErr(widen(got), widen(c.Logits))
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// run runs the case through m as an nn.Runner and returns its logits.
func run(t testing.TB, m *gpt2.Model, c *goldenCase) []float32 {
	t.Helper()
	r, err := m.NewRunner(c.In)
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	require.NoError(t, r.Set(c.In))
	require.NoError(t, r.Run())
	out, err := r.Outputs()
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, "logits", out[0].Name)
	require.Equal(t, []int{c.Batch, c.Seq, m.Config.VocabSize}, out[0].Shape)
	return out[0].F32
}

// TestGolden runs every golden case — the tiny checkpoint with and without
// padding, GPT-2 small's shape with synthetic weights — on every device in
// every precision.
func TestGolden(t *testing.T) {
	devs, err := zbench.Devices()
	require.NoError(t, err)
	cases := loadCases(t)
	for _, dev := range devs {
		for _, c := range cases {
			cfg, src := c.source(t)
			for _, pr := range precisions {
				t.Run(fmt.Sprintf("dev=%s/%s/%v", dev.Name(), c.Name, pr.p), func(t *testing.T) {
					m, err := gpt2.Load(dev, cfg, src, pr.p)
					require.NoError(t, err)
					defer func() { require.NoError(t, m.Close()) }()
					rel, maxAbs := c.relErr(run(t, m, c), cfg.VocabSize)
					t.Logf("rel-err %.3g, max-abs %.3g", rel, maxAbs)
					assert.LessOrEqual(t, rel, pr.tol)
				})
			}
		}
	}
}
