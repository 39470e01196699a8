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

// goldenFile is written by testdata/reference/quant.py (regenerate with
// /usr/bin/python3 testdata/reference/quant.py).
const goldenFile = "../../testdata/golden/quant.safetensors"

// goldenCase is a case's metadata.
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

// CaseOp names the case's op.
func (c goldenCase) CaseOp() string { return c.Op }

// goldenCases is the opened golden file and its cases by name.
type goldenCases struct{ *golden.File[goldenCase] }

func openGolden(t *testing.T) goldenCases {
	t.Helper()
	g, err := golden.Open[goldenCase](goldenFile, "testdata/reference/quant.py")
	require.NoError(t, err)
	return goldenCases{g}
}

func (g goldenCases) f32(t *testing.T, name string) ([]float32, []int) {
	t.Helper()
	ten, err := g.Tensor(name)
	require.NoError(t, err)
	require.Equal(t, "F32", ten.DType, name)
	v, err := ten.Float32()
	require.NoError(t, err)
	return v, ten.Shape
}

func (g goldenCases) i32(t *testing.T, name string) []int32 {
	t.Helper()
	ten, err := g.Tensor(name)
	require.NoError(t, err)
	v, err := ten.Int32()
	require.NoError(t, err)
	return v
}

// i64 reads an I64 tensor whose values fit in int32 (the safetensors
// package decodes integers to int32, checking the range).
func (g goldenCases) i64(t *testing.T, name string) []int64 {
	t.Helper()
	ten, err := g.Tensor(name)
	require.NoError(t, err)
	require.Equal(t, "I64", ten.DType, name)
	v, err := ten.Int32()
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
	g := openGolden(t)
	for _, op := range []string{"entropy", "mse"} {
		names := g.Names(op)
		require.Len(t, names, 3, op)
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				c := g.Cases[name]
				o, err := quant.New(op, quant.Options{Bins: c.Bins})
				require.NoError(t, err)
				for b := range c.Batches {
					x, _ := g.f32(t, fmt.Sprintf("%s/batch%d", name, b))
					require.NoError(t, o.Observe(x))
				}
				h := o.(interface{ Histogram() *quant.Histogram }).Histogram()
				require.Equal(t, c.Bins, h.Bins())
				require.Equal(t, c.Range, h.Range())
				require.Equal(t, g.i64(t, name+"/counts"), h.Counts())

				want, _ := g.f32(t, name+"/out")
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
	g := openGolden(t)
	names := g.Names("percentile")
	require.Len(t, names, 4)
	for _, name := range names {
		c := g.Cases[name]
		var bs [][]float32
		for b := range c.Batches {
			x, _ := g.f32(t, fmt.Sprintf("%s/batch%d", name, b))
			bs = append(bs, x)
		}
		want, _ := g.f32(t, name+"/out")
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
	g := openGolden(t)
	names := append(g.Names("per_channel"), g.Names("per_tensor")...)
	require.Len(t, names, 3)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := g.Cases[name]
			require.Equal(t, -127, c.QuantMin)
			require.Equal(t, 127, c.QuantMax)
			input := "w"
			if c.Op == "per_tensor" {
				input = "x"
			}
			w, shape := g.f32(t, name+"/"+input)
			require.Len(t, shape, 2)
			n, k := shape[0], shape[1]
			wantScales, _ := g.f32(t, name+"/scale")
			wantQ := g.i32(t, name+"/q")
			wantFake, _ := g.f32(t, name+"/fake")

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
