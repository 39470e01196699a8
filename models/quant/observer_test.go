package quant_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/quant"
)

// observe feeds batches to a new observer of method and returns its amax.
func observe(t *testing.T, method string, opt quant.Options, bs ...[]float32) float32 {
	t.Helper()
	o, err := quant.New(method, opt)
	require.NoError(t, err)
	for _, b := range bs {
		require.NoError(t, o.Observe(b))
	}
	a, err := o.Amax()
	require.NoError(t, err)
	require.False(t, math.IsNaN(float64(a)) || math.IsInf(float64(a), 0) || a < 0, "amax %v", a)
	return a
}

func TestAbsMax(t *testing.T) {
	for i, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			bs := batches(d, uint64(i), quant.DefaultBatches, 1000)
			got := observe(t, "absmax", quant.Options{}, bs...)
			assert.Equal(t, refAbsMax(concat(bs)), float64(got))
		})
	}
}

func TestPercentile(t *testing.T) {
	for i, d := range dists {
		bs := batches(d, 10+uint64(i), quant.DefaultBatches, 1000)
		s := sortedAbs(concat(bs))
		for _, p := range []float64{1, 50, 99, 99.9, quant.DefaultPercentile, 100} {
			t.Run(fmt.Sprintf("%s/p=%v", d.name, p), func(t *testing.T) {
				got := float64(observe(t, "percentile", quant.Options{Percentile: p}, bs...))
				want := refPercentile(s, p)
				// float32 interpolation (a fused multiply-add of the
				// rounded difference) against float64: within an ulp.
				assert.InDelta(t, want, got, ulp32(want), "p=%v", p)
				// And between the order statistics around the exact
				// float64 rank (torch's float32 rank is off by less
				// than one).
				r := p / 100 * float64(len(s)-1)
				lo, hi := max(int(r)-1, 0), min(int(r)+2, len(s)-1)
				assert.True(t, s[lo] <= got && got <= s[hi], "%v outside [%v, %v]", got, s[lo], s[hi])
			})
		}
	}
	t.Run("default", func(t *testing.T) {
		bs := batches(dists[1], 7, 5, 1000)
		assert.Equal(t, observe(t, "percentile", quant.Options{Percentile: quant.DefaultPercentile}, bs...),
			observe(t, "percentile", quant.Options{}, bs...))
	})
}

// TestPercentileSelection checks the selection on inputs that defeat
// naive quickselects: sorted, reversed, organ pipe, all equal, few values.
func TestPercentileSelection(t *testing.T) {
	const n = 20000
	inputs := map[string]func(i int) float32{
		"sorted":    func(i int) float32 { return float32(i) },
		"reversed":  func(i int) float32 { return float32(n - i) },
		"organpipe": func(i int) float32 { return float32(min(i, n-i)) },
		"equal":     func(int) float32 { return 3 },
		"fewvalues": func(i int) float32 { return float32(i*7919%5) - 2 },
		"sawtooth":  func(i int) float32 { return float32(i % 97) },
	}
	for name, f := range inputs {
		for _, size := range []int{1, 2, 17, n} {
			x := make([]float32, size)
			for i := range x {
				x[i] = f(i)
			}
			s := sortedAbs(x)
			for _, p := range []float64{0.01, 50, 99.99, 100} {
				t.Run(fmt.Sprintf("%s/n=%d/p=%v", name, size, p), func(t *testing.T) {
					want := refPercentile(s, p)
					got := observe(t, "percentile", quant.Options{Percentile: p}, x)
					assert.InDelta(t, want, float64(got), ulp32(want))
				})
			}
		}
	}
}

func TestHistPercentileBound(t *testing.T) {
	for i, d := range dists {
		bs := batches(d, 20+uint64(i), quant.DefaultBatches, 1000)
		for _, bins := range []int{quant.DefaultBins, 256} {
			for _, p := range []float64{99, 99.9, 99.99} {
				t.Run(fmt.Sprintf("%s/bins=%d/p=%v", d.name, bins, p), func(t *testing.T) {
					exact := observe(t, "percentile", quant.Options{Percentile: p}, bs...)
					o, err := quant.NewHistPercentile(p, bins)
					require.NoError(t, err)
					for _, b := range bs {
						require.NoError(t, o.Observe(b))
					}
					got, err := o.Amax()
					require.NoError(t, err)
					h := o.Histogram()
					amax := float64(h.Amax())
					bound := h.Width() // documented: ≤ R/Bins ≤ 2·amax/Bins
					require.LessOrEqual(t, bound, 2*amax/float64(bins))
					diff := math.Abs(float64(got) - float64(exact))
					assert.LessOrEqual(t, diff, bound+2*ulp32(float64(exact)), "exact %v, histogram %v", exact, got)
					t.Logf("|hist − exact| = %.3g = %.3f bins = %.2g·amax (bound %.3g)", diff, diff/bound, diff/amax, bound)
				})
			}
		}
	}
}

func TestHistogram(t *testing.T) {
	for i, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			// Batches of growing scale: the range doubles many times.
			bs := batches(d, 30+uint64(i), 20, 500)
			for b := range bs {
				for j := range bs[b] {
					bs[b][j] *= float32(math.Exp2(float64(b) / 2))
				}
			}
			h, err := quant.NewHistogram(quant.DefaultBins)
			require.NoError(t, err)
			for _, b := range bs {
				require.NoError(t, h.Add(b))
			}
			all := concat(bs)
			want, r := refHistogram(all, quant.DefaultBins)
			assert.Equal(t, want, h.Counts())
			assert.Equal(t, r, h.Range())
			assert.Equal(t, r/quant.DefaultBins, h.Width())
			assert.Equal(t, int64(len(all)), h.Total())
			assert.Equal(t, refAbsMax(all), float64(h.Amax()))
			assert.True(t, float64(h.Amax()) >= r/2 && float64(h.Amax()) < r)
		})
	}
	t.Run("zeros first", func(t *testing.T) {
		h, err := quant.NewHistogram(8)
		require.NoError(t, err)
		require.NoError(t, h.Add([]float32{0, 0, -0}))
		assert.Zero(t, h.Range())
		require.NoError(t, h.Add([]float32{1e-3, 0}))
		require.NoError(t, h.Add([]float32{1e30}))
		want, r := refHistogram([]float32{0, 0, 0, 1e-3, 0, 1e30}, 8)
		assert.Equal(t, want, h.Counts())
		assert.Equal(t, r, h.Range())
		assert.Equal(t, []int64{5, 0, 0, 0, 0, 0, 1, 0}, h.Counts()) // 1e30 ≈ 0.79·2¹⁰⁰
		// Exact zeros are 0 in the percentile estimate, not spread over bin 0.
		p, err := h.PercentileAmax(50)
		require.NoError(t, err)
		assert.Zero(t, p)
		p, err = h.PercentileAmax(60) // rank 3: the last zero
		require.NoError(t, err)
		assert.Zero(t, p)
		p, err = h.PercentileAmax(80) // rank 4: 1e-3, the only non-zero value of bin 0
		require.NoError(t, err)
		assert.Equal(t, float32(h.Width()/2), p)
		p, err = h.PercentileAmax(100)
		require.NoError(t, err)
		assert.Equal(t, float32(1e30), p)
	})
	t.Run("tiny values", func(t *testing.T) {
		x := []float32{math.SmallestNonzeroFloat32, 3 * math.SmallestNonzeroFloat32, 1e-40}
		h, err := quant.NewHistogram(16)
		require.NoError(t, err)
		require.NoError(t, h.Add(x))
		want, _ := refHistogram(x, 16)
		assert.Equal(t, want, h.Counts())
	})
	t.Run("errors", func(t *testing.T) {
		for _, bins := range []int{0, 1, 3, 2049, quant.MaxBins + 2} {
			_, err := quant.NewHistogram(bins)
			assert.ErrorIs(t, err, kernels.ErrValue, "bins %d", bins)
		}
		h, err := quant.NewHistogram(256)
		require.NoError(t, err)
		err = h.Add([]float32{1, float32(math.Inf(-1))})
		require.ErrorIs(t, err, kernels.ErrValue)
		assert.Contains(t, err.Error(), "element 1 is -Inf")
		assert.Zero(t, h.Total(), "a bad batch is not counted")
		for name, f := range map[string]func() (float32, error){
			"entropy":    h.EntropyAmax,
			"mse":        h.MSEAmax,
			"percentile": func() (float32, error) { return h.PercentileAmax(99) },
		} {
			_, err := f()
			assert.ErrorIs(t, err, quant.ErrNoData, name)
		}
		_, err = h.PercentileAmax(0)
		assert.ErrorIs(t, err, kernels.ErrValue)
		small, err := quant.NewHistogram(128)
		require.NoError(t, err)
		require.NoError(t, small.Add([]float32{1}))
		_, err = small.EntropyAmax()
		assert.ErrorIs(t, err, kernels.ErrValue)
		_, err = small.MSEAmax()
		assert.ErrorIs(t, err, kernels.ErrValue)
	})
}

func TestEntropy(t *testing.T) {
	for i, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			bs := batches(d, 40+uint64(i), quant.DefaultBatches, 1000)
			all := concat(bs)
			o, err := quant.NewEntropy(quant.DefaultBins)
			require.NoError(t, err)
			for _, b := range bs {
				require.NoError(t, o.Observe(b))
			}
			got, err := o.Amax()
			require.NoError(t, err)

			hist, r := refHistogram(all, quant.DefaultBins)
			require.Equal(t, hist, o.Histogram().Counts())
			bestI, kl := refEntropy(hist)
			width := r / quant.DefaultBins
			amax := refAbsMax(all)
			want := float32(min(float64(bestI)*width, amax))
			assert.Equal(t, want, got, "threshold bin %d", bestI)
			t.Logf("threshold %v = bin %d (KL %.4g), absmax %v, KL at the absmax bin %.4g",
				got, bestI, kl[bestI], amax, kl[int(math.Ceil(amax/width))])

			// Sensible: inside the data, above the 128th bin, and well
			// below the outliers of a heavy tail.
			assert.LessOrEqual(t, float64(got), amax)
			assert.GreaterOrEqual(t, float64(got), 128*width)
			if d.name == "laplace_outliers" {
				assert.Less(t, float64(got), amax/2)
			}
		})
	}
}

func TestMSE(t *testing.T) {
	for i, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			bs := batches(d, 50+uint64(i), quant.DefaultBatches, 1000)
			all := concat(bs)
			got := observe(t, "mse", quant.Options{}, bs...)

			hist, r := refHistogram(all, quant.DefaultBins)
			width := r / quant.DefaultBins
			amax := refAbsMax(all)
			best, bestA := math.Inf(1), 0.0
			for i := 128; i < quant.DefaultBins; i++ {
				a := (float64(i) + 0.5) * width
				if e := refQDQError(hist, width, a); e < best {
					best, bestA = e, a
				}
			}
			// The reference quantizes as pytorch-quantization does (x·(127/a));
			// ours divides by a/127: the errors agree to rounding.
			assert.InDelta(t, best, refQDQError(hist, width, float64(got)), 1e-9*best,
				"ours %v, reference %v", got, bestA)
			assert.Equal(t, float32(min(bestA, amax)), got)

			// On the data itself the clipped scale beats absmax where
			// tails are heavy.
			mse := func(a float32) float64 {
				fq, err := quant.FakeQuantize(all, []float32{quant.Scale(a)})
				require.NoError(t, err)
				e, err := quant.MSE(all, fq)
				require.NoError(t, err)
				return e
			}
			t.Logf("amax %v (absmax %v): data MSE %.3g, at absmax %.3g", got, amax, mse(got), mse(float32(amax)))
			if d.name == "laplace_outliers" || d.name == "gaussian" {
				assert.Less(t, mse(got), mse(float32(amax)))
			}
		})
	}
}

// TestStreaming checks that every method gives the same amax whatever the
// split of the values into batches.
func TestStreaming(t *testing.T) {
	for _, method := range quant.Methods() {
		for i, d := range dists {
			t.Run(method+"/"+d.name, func(t *testing.T) {
				bs := batches(d, 60+uint64(i), 12, 800)
				// Growing scales, so that histograms re-bin.
				for b := range bs {
					for j := range bs[b] {
						bs[b][j] *= float32(1 + b)
					}
				}
				one := observe(t, method, quant.Options{}, concat(bs))
				many := observe(t, method, quant.Options{}, bs...)
				rev := slices.Clone(bs)
				slices.Reverse(rev)
				reversed := observe(t, method, quant.Options{}, rev...)
				withEmpty := observe(t, method, quant.Options{}, append([][]float32{{}}, bs...)...)
				assert.Equal(t, one, many)
				assert.Equal(t, one, reversed)
				assert.Equal(t, one, withEmpty)
			})
		}
	}
}

func TestZeros(t *testing.T) {
	for _, method := range quant.Methods() {
		t.Run(method, func(t *testing.T) {
			assert.Zero(t, observe(t, method, quant.Options{}, make([]float32, 10), []float32{0, float32(math.Copysign(0, -1))}))
		})
	}
	assert.Equal(t, float32(1), quant.Scale(0))
	assert.Equal(t, float32(2.54)/127, quant.Scale(2.54))
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		method string
		opt    quant.Options
		want   string // error text; "" for success
	}{
		{"absmax", quant.Options{}, ""},
		{"percentile", quant.Options{Percentile: 99.9}, ""},
		{"percentile-hist", quant.Options{Percentile: 100, Bins: 64}, ""},
		{"entropy", quant.Options{Bins: 4096}, ""},
		{"mse", quant.Options{Bins: 256}, ""},
		{"minmax", quant.Options{}, `unknown calibration method "minmax" (want one of absmax, percentile, percentile-hist, entropy, mse)`},
		{"", quant.Options{}, `unknown calibration method ""`},
		{"Entropy", quant.Options{}, `unknown calibration method "Entropy"`},
		{"percentile", quant.Options{Percentile: -1}, "percentile -1 out of range (0, 100]"},
		{"percentile", quant.Options{Percentile: 100.5}, "percentile 100.5 out of range"},
		{"percentile-hist", quant.Options{Percentile: math.NaN()}, "percentile NaN out of range"},
		{"percentile", quant.Options{Bins: 2048}, `method "percentile" takes no bin count`},
		{"absmax", quant.Options{Percentile: 99}, `method "absmax" takes no percentile`},
		{"entropy", quant.Options{Percentile: 99}, `method "entropy" takes no percentile`},
		{"entropy", quant.Options{Bins: 128}, "entropy observer: 128 bins, want at least 256"},
		{"mse", quant.Options{Bins: 2047}, "mse observer: quant: histogram of 2047 bins: want an even count"},
		{"percentile-hist", quant.Options{Bins: -2}, "percentile-hist observer: -2 bins, want at least 2"},
		{"entropy", quant.Options{Bins: quant.MaxBins * 2}, "histogram of 2097152 bins"},
	} {
		t.Run(fmt.Sprintf("%s/%+v", tc.method, tc.opt), func(t *testing.T) {
			o, err := quant.New(tc.method, tc.opt)
			if tc.want == "" {
				require.NoError(t, err)
				assert.NotNil(t, o)
				return
			}
			require.ErrorIs(t, err, kernels.ErrValue)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := quant.NewPercentile(0)
	assert.ErrorIs(t, err, kernels.ErrValue)
	_, err = quant.NewHistPercentile(101, 2048)
	assert.ErrorIs(t, err, kernels.ErrValue)
}

func TestObserveErrors(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, method := range quant.Methods() {
		t.Run(method, func(t *testing.T) {
			o, err := quant.New(method, quant.Options{})
			require.NoError(t, err)
			_, err = o.Amax()
			require.ErrorIs(t, err, quant.ErrNoData)
			assert.EqualError(t, err, fmt.Sprintf("quant: %s observer: no values observed (0 batches): no calibration data", method))
			require.NoError(t, o.Observe(nil))
			_, err = o.Amax()
			require.ErrorIs(t, err, quant.ErrNoData)
			assert.Contains(t, err.Error(), "(1 batches)")

			require.NoError(t, o.Observe([]float32{1, 2}))
			err = o.Observe([]float32{1, 2, nan, inf})
			require.ErrorIs(t, err, kernels.ErrValue)
			assert.EqualError(t, err, fmt.Sprintf("quant: %s observer: batch 2, element 2 is NaN: invalid value", method))
			// The error is kept: later batches and Amax return it.
			assert.Equal(t, err, o.Observe([]float32{3}))
			_, err2 := o.Amax()
			assert.Equal(t, err, err2)

			o, err = quant.New(method, quant.Options{})
			require.NoError(t, err)
			err = o.Observe([]float32{float32(math.Inf(-1))})
			assert.EqualError(t, err, fmt.Sprintf("quant: %s observer: batch 0, element 0 is -Inf: invalid value", method))
			assert.False(t, errors.Is(err, quant.ErrNoData))
		})
	}
}
