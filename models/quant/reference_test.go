package quant_test

import (
	"math"
	"math/rand/v2"
	"slices"
)

// The float64 references the observers are checked against, and the
// seeded distributions they are checked on. Nothing here calls the
// package.

// dist draws n activation values.
type dist struct {
	name string
	draw func(r *rand.Rand, n int) []float32
}

// dists are the test distributions: light and heavy tails, and a ReLU's
// half zeros.
var dists = []dist{
	{"uniform", func(r *rand.Rand, n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(6*r.Float64() - 3)
		}
		return x
	}},
	{"gaussian", func(r *rand.Rand, n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}},
	{"relu", func(r *rand.Rand, n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(max(0, 2*r.NormFloat64()))
		}
		return x
	}},
	{"laplace_outliers", func(r *rand.Rand, n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.ExpFloat64())
			if r.IntN(2) == 0 {
				x[i] = -x[i]
			}
		}
		// A few outliers, 40 to 80 times the scale.
		for range 2 {
			x[r.IntN(n)] = float32(40 + 40*r.Float64())
		}
		return x
	}},
}

// batches draws nb batches of d of about n values each (unequal lengths).
func batches(d dist, seed uint64, nb, n int) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([][]float32, nb)
	for b := range out {
		out[b] = d.draw(r, n/2+r.IntN(n))
	}
	return out
}

// concat joins batches into one.
func concat(bs [][]float32) []float32 {
	var out []float32
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// sortedAbs returns |x| in float64, sorted.
func sortedAbs(x []float32) []float64 {
	a := make([]float64, len(x))
	for i, v := range x {
		a[i] = math.Abs(float64(v))
	}
	slices.Sort(a)
	return a
}

// refAbsMax is max |x| in float64.
func refAbsMax(x []float32) float64 {
	m := 0.0
	for _, v := range x {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}

// refPercentile is torch.quantile's linear interpolation of sorted s at
// the p-th percentile, with torch's rank (q = float32(p/100), rank =
// q·(n−1) rounded to float32) and the interpolation in float64.
func refPercentile(s []float64, p float64) float64 {
	q := float32(p / 100)
	rank := float64(float32(q * float32(len(s)-1)))
	lo := math.Floor(rank)
	hi := math.Ceil(rank)
	w := rank - lo
	return s[int(lo)] + w*(s[int(hi)]-s[int(lo)])
}

// refHistogram is the documented histogram of x built at once: bins over
// [0, R), R the smallest power of two above max |x|, value v in bin
// ⌊|v|/R·bins⌋; and R.
func refHistogram(x []float32, bins int) ([]int64, float64) {
	amax := refAbsMax(x)
	counts := make([]int64, bins)
	if amax == 0 {
		counts[0] = int64(len(x))
		return counts, 0
	}
	r := 1.0
	for r <= amax {
		r *= 2
	}
	for r/2 > amax {
		r /= 2
	}
	for _, v := range x {
		counts[int(math.Floor(math.Abs(float64(v))/r*float64(bins)))]++
	}
	return counts, r
}

// refEntropy follows pytorch-quantization's _compute_amax_entropy step by
// step (stride 1, start bin 128, 128 levels), in float64, and returns the
// threshold bin i and the divergences by i.
func refEntropy(hist []int64) (int, map[int]float64) {
	const nbins = 128
	bins := make([]float64, len(hist))
	for i, c := range hist {
		bins[i] = float64(c)
	}
	bins[0] = bins[1]
	divergences := map[int]float64{}
	bestI, best := 0, math.Inf(1)
	for i := 128; i <= len(bins); i++ {
		// space = np.linspace(0, i, nbins+1); digitized = digitize(range(i), space) − 1.
		space := make([]float64, nbins+1)
		for k := range space {
			space[k] = float64(k) * float64(i) / nbins
		}
		digitized := make([]int, i)
		k := 0 // searched on from the previous j's: j grows
		for j := range digitized {
			for k+1 < len(space) && space[k+1] <= float64(j) {
				k++
			}
			digitized[j] = k
			if bins[j] == 0 {
				digitized[j] = -1
			}
		}
		newDensityCounts := make([]float64, nbins)
		counter := make([]float64, nbins)
		for j, d := range digitized {
			if d != -1 {
				newDensityCounts[d] += bins[j]
				counter[d]++
			}
		}
		for k := range newDensityCounts {
			if counter[k] != 0 {
				newDensityCounts[k] /= counter[k]
			}
		}
		newDensity := make([]float64, i)
		for j, d := range digitized {
			if d != -1 {
				newDensity[j] = newDensityCounts[d]
			}
		}
		reference := slices.Clone(bins[:i])
		for _, c := range bins[i:] {
			reference[i-1] += c
		}
		// scipy.stats.entropy(reference, newDensity).
		sumP, sumQ := 0.0, 0.0
		for j := range reference {
			sumP += reference[j]
			sumQ += newDensity[j]
		}
		kl := 0.0
		for j := range reference {
			p, q := reference[j]/sumP, newDensity[j]/sumQ
			switch {
			case p == 0:
			case q == 0:
				kl = math.Inf(1)
			default:
				kl += p * math.Log(p/q)
			}
		}
		divergences[i] = kl
		if kl <= best { // the last argmin
			bestI, best = i, kl
		}
	}
	return bestI, divergences
}

// refQDQError is the histogram's squared quantize-dequantize error at
// clipping point a, each bin's values at its centre, quantized as
// pytorch-quantization's fake_tensor_quant does (x·(127/a), rounded half
// to even, clamped to 127, divided back).
func refQDQError(hist []int64, width, a float64) float64 {
	scale := 127 / a
	sum := 0.0
	for j, c := range hist {
		x := (float64(j) + 0.5) * width
		d := min(math.RoundToEven(x*scale), 127)/scale - x
		sum += float64(c) * d * d
	}
	return sum
}

// ulp32 is the spacing of float32 values at |v|.
func ulp32(v float64) float64 {
	f := float32(math.Abs(v))
	return float64(math.Nextafter32(f, math.MaxFloat32) - f)
}
