package quant_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/internal/golden"
	"github.com/zbench/zbench/models/quant"
)

// goldenCase is a case's metadata in testdata/golden/quant.safetensors,
// written by testdata/reference/quant.py (regenerate with /usr/bin/python3
// testdata/reference/quant.py).
type goldenCase struct {
	Op                string    `json:"op"`
	Dist              string    `json:"dist"`
	Batches           int       `json:"batches"`
	Percentiles       []float64 `json:"percentiles"`
	QuantMin          int       `json:"quant_min"`
	QuantMax          int       `json:"quant_max"`
	Axis              *int      `json:"axis"`
	ReciprocalDiffers int       `json:"reciprocal_differs"`
	Bins              int       `json:"bins"`
	Range             float64   `json:"range"`
	Bin               int       `json:"bin"`
}

// openGolden opens the golden file and decodes its cases.
func openGolden(t *testing.T) (*golden.File, map[string]goldenCase) {
	t.Helper()
	g := golden.Require(t, "quant", "testdata/reference/quant.py")
	return g, golden.RequireCases[goldenCase](t, g)
}

// i64 reads an I64 role whose values fit in int32 (the safetensors
// package decodes integers to int32, checking the range).
func i64(t *testing.T, g *golden.File, name, role string) []int64 {
	t.Helper()
	v, err := g.RequireRaw(t, name, role, "I64").Int32()
	require.NoError(t, err)
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// TestGoldenHistogramSearch checks the entropy and mse observers against
// the reference's own histogram and its searches (pytorch-quantization's
// _compute_amax_entropy and _compute_amax_mse over the documented
// Histogram), streaming the batches: the range and every bin count
// exactly, then the amax bit for bit. The reference keeps only cases whose
// chosen threshold beats every other candidate by a relative margin above
// 1e-9 (in the file, 8e-5 at the least) in KL divergence or squared error,
// far above the float64 rounding in which the two sums may differ, so the
// same bin must win here; the amax, an edge or centre of that bin (or
// Amax, where that is smaller), is then the same float32.
func TestGoldenHistogramSearch(t *testing.T) {
	g, cases := openGolden(t)
	for _, op := range []string{"entropy", "mse"} {
		names := g.RequireOp(t, op)
		require.Len(t, names, 3, op)
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				c := cases[name]
				o, err := quant.New(op, quant.Options{Bins: c.Bins})
				require.NoError(t, err)
				for b := range c.Batches {
					x, _ := g.RequireF32(t, name, fmt.Sprintf("batch%d", b))
					require.NoError(t, o.Observe(x))
				}
				h := o.(interface{ Histogram() *quant.Histogram }).Histogram()
				require.Equal(t, c.Bins, h.Bins())
				require.Equal(t, c.Range, h.Range())
				require.Equal(t, i64(t, g, name, "counts"), h.Counts())

				want, _ := g.RequireF32(t, name, "out")
				require.Len(t, want, 1)
				got, err := o.Amax()
				require.NoError(t, err)
				assert.Equal(t, math.Float32bits(want[0]), math.Float32bits(got), "reference %v, ours %v", want[0], got)
				t.Logf("bin %d of %d, range %v: amax %v (reference %v, %.3g bins off; largest |x| %v)",
					c.Bin, c.Bins, c.Range, got, want[0], (float64(got)-float64(want[0]))/h.Width(), h.Amax())
			})
		}
	}
}

// TestGoldenPercentile checks the percentile observer against
// torch.quantile bit for bit, streaming the batches, and the histogram
// percentile against its bound.
func TestGoldenPercentile(t *testing.T) {
	g, cases := openGolden(t)
	names := g.RequireOp(t, "percentile")
	require.Len(t, names, 4)
	for _, name := range names {
		c := cases[name]
		var bs [][]float32
		for b := range c.Batches {
			x, _ := g.RequireF32(t, name, fmt.Sprintf("batch%d", b))
			bs = append(bs, x)
		}
		want, _ := g.RequireF32(t, name, "out")
		require.Len(t, want, len(c.Percentiles))
		for i, p := range c.Percentiles {
			t.Run(fmt.Sprintf("%s/p=%v", name, p), func(t *testing.T) {
				got := observe(t, "percentile", quant.Options{Percentile: p}, bs...)
				assert.Equal(t, math.Float32bits(want[i]), math.Float32bits(got), "torch %v, ours %v", want[i], got)

				o, err := quant.NewHistPercentile(p, quant.DefaultBins)
				require.NoError(t, err)
				for _, b := range bs {
					require.NoError(t, o.Observe(b))
				}
				est, err := o.Amax()
				require.NoError(t, err)
				w := o.Histogram().Width()
				diff := math.Abs(float64(est) - float64(want[i]))
				assert.LessOrEqual(t, diff, w+2*ulp32(float64(want[i])))
				t.Logf("torch %v, histogram %v: %.3f bins off", want[i], est, diff/w)
			})
		}
	}
}

// TestGoldenWeights checks per-channel and per-tensor quantization against
// torch.quantize_per_channel / quantize_per_tensor and their fake-quantize
// twins: the scales bit for bit, the int8 values exactly except where
// torch's multiplication by the float32 reciprocal of the scale rounds
// differently from our division (kernels.QuantizeValue), which the script
// counts too.
func TestGoldenWeights(t *testing.T) {
	g, cases := openGolden(t)
	names := append(g.RequireOp(t, "per_channel"), g.RequireOp(t, "per_tensor")...)
	require.Len(t, names, 3)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := cases[name]
			require.Equal(t, -127, c.QuantMin)
			require.Equal(t, 127, c.QuantMax)
			input := "w"
			if c.Op == "per_tensor" {
				input = "x"
			}
			w, shape := g.RequireF32(t, name, input)
			require.Len(t, shape, 2)
			n, k := shape[0], shape[1]
			wantScales, _ := g.RequireF32(t, name, "scale")
			wantQ := g.RequireI32(t, name, "q")
			wantFake, _ := g.RequireF32(t, name, "fake")

			var q []int8
			var scales []float32
			if c.Op == "per_channel" {
				require.Equal(t, 0, *c.Axis)
				var err error
				q, scales, err = quant.QuantizePerChannel(w, n, k)
				require.NoError(t, err)
			} else {
				require.Nil(t, c.Axis)
				var s float32
				var err error
				q, s, err = quant.QuantizePerTensor(w)
				require.NoError(t, err)
				scales = []float32{s}
			}
			assert.Equal(t, wantScales, scales)
			fake, err := quant.FakeQuantize(w, scales)
			require.NoError(t, err)

			rowLen := len(w) / len(scales)
			differs := 0
			for i := range w {
				s := scales[i/rowLen]
				if int32(q[i]) == wantQ[i] {
					assert.Equal(t, wantFake[i], fake[i], "element %d", i)
					continue
				}
				// torch: round(x·(1/s)) in float32.
				inv := float32(1) / s
				recip := float32(math.RoundToEven(float64(float32(w[i] * inv))))
				require.Equal(t, float32(wantQ[i]), recip, "element %d: torch's int8 is not the reciprocal rounding", i)
				require.InDelta(t, wantQ[i], q[i], 1, "element %d", i)
				assert.Equal(t, float32(wantQ[i])*s, wantFake[i], "element %d", i)
				differs++
			}
			assert.Equal(t, c.ReciprocalDiffers, differs, "elements rounded differently from torch")
			t.Logf("%d×%d: %d of %d int8 values equal torch's; %d differ by one step (torch's reciprocal)",
				n, k, len(w)-differs, len(w), differs)
		})
	}
}
