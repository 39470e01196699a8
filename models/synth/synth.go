// Package synth generates seeded synthetic weights that the Go code and the
// PyTorch reference scripts produce identically, so that goldens of
// full-size models store only inputs and outputs.
//
// The generator is a splitmix64 counter hash keyed by the tensor's name:
//
//	k       = seed XOR fnv1a64(name)
//	z_i     = splitmix64 finaliser of k + (i+1)·0x9e3779b97f4a7c15   (mod 2⁶⁴)
//	u_i     = (z_i >> 40) / 2²⁴                                       in [0, 1)
//	value_i = float32(center + half·(2·u_i − 1))                     in float64, rounded to nearest
//
// for the row-major element index i. testdata/reference/bert.py implements
// the same definition in numpy.
package synth

import (
	"hash/fnv"

	"github.com/zbench/zbench/internal/ranges"
)

// golden is splitmix64's increment, the 64-bit golden ratio.
const golden = 0x9e3779b97f4a7c15

// Key returns the stream key of the named tensor under seed.
func Key(seed uint64, name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name)) // a hash.Hash never fails to write
	return seed ^ h.Sum64()
}

// mix is splitmix64's output function.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Unit returns element i of the stream with key k, uniform in [0, 1) with
// 24 random bits.
func Unit(k uint64, i int) float64 {
	return float64(mix(k+uint64(i+1)*golden)>>40) / (1 << 24)
}

// fillMin is the fewest values worth a goroutine of their own in Fill.
const fillMin = 1 << 16

// Fill writes the first len(dst) values of the named tensor's stream,
// uniform in [center−half, center+half) before the rounding to float32,
// which may reach center+half itself. Each value depends only on its
// index, so a large dst is filled in ranges, one per processor, in
// parallel.
func Fill(dst []float32, seed uint64, name string, center, half float64) {
	k := Key(seed, name)
	fill := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			// The conversion rounds the product on its own, so that no
			// platform fuses it with the sum (the reference rounds twice).
			dst[i] = float32(center + float64(half*(2*Unit(k, i)-1)))
		}
	}
	ranges.Parallel(len(dst), fillMin, fill)
}

// Uniform returns n values of the named tensor's stream (see Fill).
func Uniform(seed uint64, name string, n int, center, half float64) []float32 {
	out := make([]float32, n)
	Fill(out, seed, name, center, half)
	return out
}
