package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/internal/golden"
	"github.com/zbench/zbench/kernels"
)

// fp8GoldenCase is a case's metadata in testdata/golden/fp8.safetensors
// (the fields these tests use), written by testdata/reference/fp8.py
// (regenerate with /usr/bin/python3 testdata/reference/fp8.py) from the
// OFP8 v1.0 bit fields and CUDA's satfinite conversion, independently of
// this package.
type fp8GoldenCase struct {
	Op      string `json:"op"`
	Format  string `json:"format"`
	AFormat string `json:"a_format"`
	BFormat string `json:"b_format"`
	M       int    `json:"m"`
	N       int    `json:"n"`
	K       int    `json:"k"`
}

// openFP8Golden opens the golden file and decodes its cases.
func openFP8Golden(t *testing.T) (*golden.File, map[string]fp8GoldenCase) {
	t.Helper()
	g := golden.Require(t, "fp8", "testdata/reference/fp8.py")
	return g, golden.RequireCases[fp8GoldenCase](t, g)
}

// fp8Conv is one format's conversions under test.
type fp8Conv struct {
	dec func(uint8) float32
	enc func(float32) uint8
	max float32
}

var fp8Convs = map[string]fp8Conv{
	"e4m3": {kernels.E4M3ToFloat32, kernels.E4M3FromFloat32, 448},
	"e5m2": {kernels.E5M2ToFloat32, kernels.E5M2FromFloat32, 57344},
}

// codeMismatches compares codes with want and describes at most a few of
// the differences, naming the input each came from.
func codeMismatches(got, want []uint8, input func(i int) string) []string {
	var out []string
	n := 0
	for i := range want {
		if got[i] != want[i] {
			n++
			if len(out) < 8 {
				out = append(out, fmt.Sprintf("[%d] %s: got %#02x, want %#02x", i, input(i), got[i], want[i]))
			}
		}
	}
	if n > len(out) {
		out = append(out, fmt.Sprintf("… %d mismatches in all", n))
	}
	return out
}

// TestFP8GoldenDecode checks that every code of both formats widens to the
// OFP8 value bit for bit (−0 included), and NaN codes to a NaN.
func TestFP8GoldenDecode(t *testing.T) {
	g, cases := openFP8Golden(t)
	for _, tc := range []struct{ name, format string }{{"e4m3", "e4m3"}, {"e5m2", "e5m2"}} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, "fp8_values", cases[tc.name].Op)
			want, shape := g.RequireF32(t, tc.name, "values")
			require.Equal(t, []int{256}, shape)
			conv := fp8Convs[tc.format]
			for c := range 256 {
				got := conv.dec(uint8(c))
				if want[c] != want[c] {
					assert.True(t, got != got, "%s %#02x: got %g, want NaN", tc.name, c, got)
					continue
				}
				assert.Equal(t, math.Float32bits(want[c]), math.Float32bits(got),
					"%s %#02x: got %g, want %g", tc.name, c, got, want[c])
			}
		})
	}
}

// TestFP8GoldenEncode checks the satfinite encoders against every input of
// the encode cases: values, midpoints and their neighbours, subnormals,
// the overflow midpoint, infinities, NaNs and random values of wide range.
func TestFP8GoldenEncode(t *testing.T) {
	g, cases := openFP8Golden(t)
	names := g.RequireOp(t, "fp8_encode")
	require.Equal(t, []string{"encode_e4m3", "encode_e5m2"}, names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			conv := fp8Convs[cases[name].Format]
			x, _ := g.RequireF32(t, name, "x")
			want := g.RequireRaw(t, name, "codes", "U8").Data
			require.Len(t, want, len(x))
			got := make([]uint8, len(x))
			for i, v := range x {
				got[i] = conv.enc(v)
			}
			assert.Empty(t, codeMismatches(got, want, func(i int) string {
				return fmt.Sprintf("x=%g (%#08x)", x[i], math.Float32bits(x[i]))
			}))
		})
	}
}

// TestFP8GoldenScaledCodes checks the encoders on scaled values as the
// recipes make them: Transformer Engine's current scaling (codes of
// fl32(x·scale), scale = fl32(max/amax), scale_inv = fl32(1/scale)) and
// DeepSeek-V3's block quantization (codes of fl32(x/s)).
func TestFP8GoldenScaledCodes(t *testing.T) {
	g, cases := openFP8Golden(t)
	for _, name := range g.RequireOp(t, "current_scaling") {
		t.Run(name, func(t *testing.T) {
			conv := fp8Convs[cases[name].Format]
			x, _ := g.RequireF32(t, name, "x")
			amax, _ := g.RequireF32(t, name, "amax")
			scale, _ := g.RequireF32(t, name, "scale")
			scaleInv, _ := g.RequireF32(t, name, "scale_inv")
			want := g.RequireRaw(t, name, "codes", "U8").Data
			var m float32
			for _, v := range x {
				m = max(m, float32(math.Abs(float64(v))))
			}
			require.Equal(t, m, amax[0], "amax")
			s := float32(1)
			if m > 0 && !math.IsInf(float64(m), 0) {
				s = conv.max / m
				if math.IsInf(float64(s), 0) {
					s = math.MaxFloat32
				}
			}
			require.Equal(t, s, scale[0], "scale")
			require.Equal(t, 1/s, scaleInv[0], "scale_inv")
			got := make([]uint8, len(x))
			for i, v := range x {
				got[i] = conv.enc(v * s)
			}
			assert.Empty(t, codeMismatches(got, want, func(i int) string { return fmt.Sprintf("x·scale=%g", x[i]*s) }))
		})
	}
	for _, name := range []string{"block_act", "block_weight"} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, name, cases[name].Op)
			role := map[string]string{"block_act": "x", "block_weight": "w"}[name]
			x, shape := g.RequireF32(t, name, role)
			want := g.RequireRaw(t, name, "codes", "U8").Data
			scales, sshape := g.RequireF32(t, name, "scales")
			rows, cols := 1, 128
			if name == "block_weight" {
				rows = 128
			}
			require.Equal(t, []int{shape[0] / rows, shape[1] / cols}, sshape)
			got := make([]uint8, len(x))
			for r := range shape[0] {
				for c := range shape[1] {
					s := scales[(r/rows)*sshape[1]+c/cols]
					got[r*shape[1]+c] = kernels.E4M3FromFloat32(x[r*shape[1]+c] / s)
				}
			}
			assert.Empty(t, codeMismatches(got, want, func(i int) string { return fmt.Sprintf("x=%g", x[i]) }))
		})
	}
}

// TestFP8GoldenGEMMLayout checks the GEMM cases' layout (a [M, K], b
// [N, K], out = (dec(a)·a_scale_inv)(dec(b)·b_scale_inv)ᵀ + bias) with the
// decoders: a float64 evaluation, rounded to float32, is within one ulp of
// the reference's exactly rounded out (float64 rounding can move a result
// lying at a float32 midpoint).
func TestFP8GoldenGEMMLayout(t *testing.T) {
	g, cases := openFP8Golden(t)
	names := g.RequireOp(t, "fp8_gemm")
	require.Len(t, names, 4)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := cases[name]
			a := g.RequireRaw(t, name, "a", "U8")
			b := g.RequireRaw(t, name, "b", "U8")
			asi, _ := g.RequireF32(t, name, "a_scale_inv")
			bsi, _ := g.RequireF32(t, name, "b_scale_inv")
			bias, _ := g.RequireF32(t, name, "bias")
			out, oshape := g.RequireF32(t, name, "out")
			require.Equal(t, []int{c.M, c.K}, a.Shape)
			require.Equal(t, []int{c.N, c.K}, b.Shape)
			require.Equal(t, []int{c.M, c.N}, oshape)
			da, db := fp8Convs[c.AFormat].dec, fp8Convs[c.BFormat].dec
			for i := range c.M {
				for j := range c.N {
					var s float64
					for k := range c.K {
						s += float64(da(a.Data[i*c.K+k])) * float64(asi[0]) * float64(db(b.Data[j*c.K+k])) * float64(bsi[0])
					}
					got := float32(s + float64(bias[j]))
					want := out[i*c.N+j]
					ulp := math.Nextafter32(want, float32(math.Inf(1))) - want
					assert.InDelta(t, want, got, float64(ulp), "out[%d, %d]", i, j)
				}
			}
		})
	}
}
