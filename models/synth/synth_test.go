package synth_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/synth"
)

// The expected bits below were printed by testdata/reference/bert.py's
// numpy generator (synthetic_values(name, seed, start+n, center, half)[start:]),
// so they pin the Go generator to the cross-language definition.
func TestUniformMatchesReference(t *testing.T) {
	tests := []struct {
		seed         uint64
		name         string
		start        int
		center, half float64
		want         []uint32 // math.Float32bits of elements start, start+1, ...
	}{
		{
			seed: 1, name: "embeddings.word_embeddings.weight", center: 0, half: 0.05,
			want: []uint32{0x3d28d293, 0xbd482b86, 0x3c54052d, 0xbc81955d, 0xbcbbdbc3, 0xbd2f29ca, 0xbd2ca88a, 0xbcd52660},
		},
		{
			seed: 20261121, name: "encoder.layer.3.attention.output.LayerNorm.weight", center: 1, half: 0.1,
			want: []uint32{0x3f83ef7f, 0x3f7fd678, 0x3f88b049, 0x3f74d586, 0x3f865d02, 0x3f6a23ce, 0x3f87c3a8, 0x3f72286b},
		},
		{
			seed: 7, name: "encoder.layer.11.intermediate.dense.weight", start: 1_000_000, center: 0, half: 0.05,
			want: []uint32{0x3d074b5a, 0xbd4bc2b2, 0xbc9ad8f0, 0x3b9cea33},
		},
		{
			// Across the reference's 2²² chunk boundary.
			seed: 20261121, name: "embeddings.word_embeddings.weight", start: 1<<22 - 2, center: 0, half: 0.05,
			want: []uint32{0x3d438393, 0xbc5bc286, 0x3d07ddc0, 0xbd04d4da},
		},
		{
			seed: 0, name: "", center: 0, half: 1,
			want: []uint32{0x3f0702f8, 0xbf5fe64c, 0xbeacf16c},
		},
		{
			seed: math.MaxUint64, name: "cls.predictions.bias", center: 0, half: 0.02,
			want: []uint32{0xbbef199a, 0x3c7aaeb6, 0xbbea3d76, 0x3c729eec},
		},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d/%s/%d", tc.seed, tc.name, tc.start), func(t *testing.T) {
			vals := synth.Uniform(tc.seed, tc.name, tc.start+len(tc.want), tc.center, tc.half)
			require.Len(t, vals, tc.start+len(tc.want))
			got := make([]uint32, len(tc.want))
			for i, v := range vals[tc.start:] {
				got[i] = math.Float32bits(v)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// Test vectors of FNV-1a 64 and splitmix64, as asserted by the reference
// script's self_test.
func TestKeyAndUnitVectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		want uint64
	}{
		{"", 0xcbf29ce484222325},
		{"a", 0xaf63dc4c8601ec8c},
		{"foobar", 0x85944171f73967e8},
		{"embeddings.word_embeddings.weight", 0x030867d9a1e48770},
	} {
		assert.Equal(t, tc.want, synth.Key(0, tc.name), "fnv1a64(%q)", tc.name)
		assert.Equal(t, tc.want^0xdeadbeef, synth.Key(0xdeadbeef, tc.name), "seed xor fnv1a64(%q)", tc.name)
	}
	// splitmix64 seeded 0: its first outputs, of which Unit keeps the top
	// 24 bits.
	for i, z := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		assert.Equal(t, float64(z>>40)/(1<<24), synth.Unit(0, i), "Unit(0, %d)", i)
	}
}

func TestUniformProperties(t *testing.T) {
	names := []string{
		"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
		"encoder.layer.0.attention.self.query.weight", "encoder.layer.0.attention.self.key.weight",
		"encoder.layer.1.attention.self.query.weight", "cls.predictions.bias", "",
	}
	ranges := []struct{ center, half float64 }{{0, 0.05}, {1, 0.1}, {0, 0.02}, {-3, 2}, {0.5, 0.5}}
	const n = 4096
	streams := map[string][]float32{}
	for _, name := range names {
		for _, r := range ranges {
			for _, seed := range []uint64{0, 1, 7, 20261121} {
				vals := synth.Uniform(seed, name, n, r.center, r.half)
				require.Len(t, vals, n)
				lo, hi := float32(r.center-r.half), float32(r.center+r.half)
				var sum float64
				for i, v := range vals {
					// In float64 the value is < center+half, but rounding to
					// float32 may land on float32(center+half) when u is
					// within about 2⁻²² of 1 (see TestUpperBoundRounding).
					require.True(t, v >= lo && v <= hi, "%s seed %d: element %d = %v outside [%v, %v]", name, seed, i, v, lo, hi)
					sum += float64(v)
				}
				mean := sum / n
				assert.InDelta(t, r.center, mean, 0.1*r.half, "%s seed %d: mean", name, seed)
				if r == ranges[0] {
					streams[fmt.Sprintf("%d/%s", seed, name)] = vals
				}
			}
		}
	}
	// Different names or seeds give different streams.
	seen := map[uint32]string{}
	for key, vals := range streams {
		first := math.Float32bits(vals[0])<<8 ^ math.Float32bits(vals[1]) // cheap fingerprint
		if other, ok := seen[first]; ok {
			t.Errorf("streams %s and %s start alike", key, other)
		}
		seen[first] = key
		for otherKey, other := range streams {
			if otherKey == key {
				continue
			}
			same := 0
			for i := range vals {
				if vals[i] == other[i] {
					same++
				}
			}
			assert.Less(t, same, n/100, "streams %s and %s share %d of %d values", key, otherKey, same, n)
		}
	}
}

func TestFillEqualsUniform(t *testing.T) {
	for _, tc := range []struct {
		seed         uint64
		name         string
		n            int
		center, half float64
	}{
		{1, "a", 0, 0, 1},
		{1, "a", 1, 0, 1},
		{7, "encoder.layer.0.output.LayerNorm.weight", 37, 1, 0.1},
		{20261121, "embeddings.word_embeddings.weight", 10_000, 0, 0.05},
		{3, "model.layers.0.mlp.up_proj.weight", 300_001, 0, 0.02}, // filled in parallel ranges
	} {
		want := synth.Uniform(tc.seed, tc.name, tc.n, tc.center, tc.half)
		got := make([]float32, tc.n)
		synth.Fill(got, tc.seed, tc.name, tc.center, tc.half)
		assert.Equal(t, want, got, "%+v", tc)
		// A prefix is the stream's prefix: Fill does not depend on len(dst).
		if tc.n > 3 {
			short := make([]float32, 3)
			synth.Fill(short, tc.seed, tc.name, tc.center, tc.half)
			assert.Equal(t, want[:3], short)
		}
		// Elements come from Unit with the tensor's key, every one in
		// order whatever ranges Fill splits dst into.
		k := synth.Key(tc.seed, tc.name)
		serial := make([]float32, tc.n)
		for i := range serial {
			serial[i] = float32(tc.center + float64(tc.half*(2*synth.Unit(k, i)-1)))
		}
		assert.Equal(t, serial, want)
	}
}

func TestUnitRange(t *testing.T) {
	for _, k := range []uint64{0, 1, math.MaxUint64, 0x9e3779b97f4a7c15} {
		for i := range 10_000 {
			u := synth.Unit(k, i)
			require.True(t, u >= 0 && u < 1, "Unit(%#x, %d) = %v", k, i, u)
			require.Equal(t, u, math.Ldexp(math.Floor(math.Ldexp(u, 24)), -24), "Unit has more than 24 bits")
		}
	}
}

// TestUpperBoundRounding documents that the package comment's
// "in [center−half, center+half)" holds in float64, before the final
// rounding: the largest u, 1 − 2⁻²⁴, rounds to float32(center+half) for
// 1 ± 0.1.
func TestUpperBoundRounding(t *testing.T) {
	const uMax = 1 - 1.0/(1<<24)
	v := float32(1 + 0.1*(2*uMax-1))
	assert.Equal(t, float32(1.1), v)
}
