package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu/internal/vecmath"
)

// widenCase is a vectorised widening with its scalar reference.
type widenCase struct {
	name   string
	vec    func(dst []float32, src []uint16)
	scalar func(uint16) float32
}

// narrowCase is a vectorised rounding with its scalar reference.
type narrowCase struct {
	name   string
	vec    func(dst []uint16, src []float32)
	scalar func(float32) uint16
}

var (
	widenCases = []widenCase{
		{"F16ToF32", vecmath.F16ToF32, kernels.F16ToFloat32},
		{"BF16ToF32", vecmath.BF16ToF32, kernels.BF16ToFloat32},
	}
	narrowCases = []narrowCase{
		{"F32ToF16", vecmath.F32ToF16, kernels.F16FromFloat32},
		{"F32ToBF16", vecmath.F32ToBF16, kernels.BF16FromFloat32},
	}
)

// castMode is a vector implementation of the casts: its name and the
// value of vecmath.AVX512 that selects it.
type castMode struct {
	name   string
	avx512 bool
}

// castModes returns the vector implementations this CPU runs: AVX-512
// where it has it, and AVX2 with F16C, which every AVX-512 CPU also has.
func castModes() []castMode {
	if vecmath.AVX512 {
		return []castMode{{"avx512", true}, {"avx2", false}}
	}
	return []castMode{{"avx2", false}}
}

// runCastModes runs f in a subtest for each of castModes, with
// vecmath.AVX512 set for it and restored after.
func runCastModes(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	if !vecmath.CastAvailable {
		t.Skip("no vectorised casts on this CPU")
	}
	for _, m := range castModes() {
		t.Run(m.name, func(t *testing.T) {
			old := vecmath.AVX512
			vecmath.AVX512 = m.avx512
			t.Cleanup(func() { vecmath.AVX512 = old })
			f(t)
		})
	}
}

// castMismatches returns up to 10 lines describing the i where got[i] and
// want[i] differ, as hex bits of src[i], got[i] and want[i].
func castMismatches[S, D any](src []S, got, want []D, bits func(D) uint32, sbits func(S) uint32) []string {
	var bad []string
	for i := range want {
		if bits(got[i]) != bits(want[i]) {
			bad = append(bad, fmt.Sprintf("src[%d] %#08x: got %#08x, want %#08x", i, sbits(src[i]), bits(got[i]), bits(want[i])))
			if len(bad) == 10 {
				break
			}
		}
	}
	return bad
}

func f32Bits(f float32) uint32 { return math.Float32bits(f) }
func u16Bits(h uint16) uint32  { return uint32(h) }

// checkWiden compares c.vec on src with c.scalar bit for bit.
func checkWiden(t testing.TB, c widenCase, src []uint16) {
	t.Helper()
	got := make([]float32, len(src))
	want := make([]float32, len(src))
	c.vec(got, src)
	for i, h := range src {
		want[i] = c.scalar(h)
	}
	require.Empty(t, castMismatches(src, got, want, f32Bits, u16Bits), "%s, %d values", c.name, len(src))
}

// checkNarrow compares c.vec on src with c.scalar bit for bit, NaNs
// included.
func checkNarrow(t testing.TB, c narrowCase, src []float32) {
	t.Helper()
	got := make([]uint16, len(src))
	want := make([]uint16, len(src))
	c.vec(got, src)
	for i, f := range src {
		want[i] = c.scalar(f)
	}
	require.Empty(t, castMismatches(src, got, want, u16Bits, f32Bits), "%s, %d values", c.name, len(src))
}

// TestCastWidenExhaustive widens every 16-bit pattern.
func TestCastWidenExhaustive(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	runCastModes(t, func(t *testing.T) {
		for _, c := range widenCases {
			checkWiden(t, c, src)
		}
	})
}

// castEdgeBits are float32 bit patterns at the edges of both roundings;
// each is also tested negated.
var castEdgeBits = []uint32{
	0x00000000,             // +0
	0x7f800000,             // +Inf
	0x7fc00000,             // the quiet NaN
	0x7f800001, 0x7f801fff, // signalling NaNs whose payload is dropped by both roundings
	0x7f802000, 0x7f810000, // signalling NaNs with a payload left after the rounding
	0x7fa00000, 0x7fbfffff, // signalling NaNs with high payloads
	0x7fc00001, 0x7fffffff, 0x7fd55555, 0x7fe00000, // quiet NaNs
	0x7f7fffff, 0x7f7f8000, 0x7f7f7fff, 0x7f7effff, 0x7f7e8000, // largest float32, bf16 overflow and ties
	0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x47800000, // 65504, f16's largest, and overflow at 65520
	0x477fd000, 0x477fb000, // f16 ties below 65504, to even
	0x38800000, 0x387fffff, 0x387ff000, 0x387fe000, // 2⁻¹⁴, f16's smallest normal, and below
	0x33800000, 0x33000000, 0x33000001, 0x32ffffff, 0x33c00000, 0x34200000, // 2⁻²⁴, its half (ties to 0), 1.5·2⁻²⁴
	0x00000001, 0x00008000, 0x00008001, 0x00018000, 0x007fffff, 0x00800000, // float32 subnormals for bf16
	0x3f800000, 0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001, // 1 and bf16 ties around it
	0x3f801000, 0x3f803000, 0x3f800fff, 0x3f801001, // f16 ties around 1
}

// castTieBits returns float32 patterns at and around every rounding tie:
// the midpoints of all adjacent finite binary16 values and of all bfloat16
// values with a next, one float32 ulp either side, both signs.
func castTieBits() []uint32 {
	var out []uint32
	add := func(mid uint32) {
		out = append(out, mid-1, mid, mid+1)
	}
	for h := uint16(0); h < 0x7bff; h++ {
		lo, hi := kernels.F16ToFloat32(h), kernels.F16ToFloat32(h+1)
		add(math.Float32bits(float32((float64(lo) + float64(hi)) / 2)))
	}
	add(0x477ff000) // 65520, between 65504 and the next binade's 65536
	for hi := range uint32(1 << 15) {
		add(hi<<16 | 0x8000)
	}
	for i, n := 0, len(out); i < n; i++ {
		out = append(out, out[i]|0x80000000)
	}
	return out
}

// TestCastNarrow rounds the edge cases, the ties and a million random
// patterns, requiring the scalar results bit for bit: the NaNs too, which
// both sides make quiet with the sign and the payload's top bits kept.
func TestCastNarrow(t *testing.T) {
	var bits []uint32
	for _, b := range castEdgeBits {
		bits = append(bits, b, b|0x80000000)
	}
	bits = append(bits, castTieBits()...)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		bits = append(bits, rng.Uint32())
	}
	src := make([]float32, len(bits))
	for i, b := range bits {
		src[i] = math.Float32frombits(b)
	}
	runCastModes(t, func(t *testing.T) {
		for _, c := range narrowCases {
			checkNarrow(t, c, castEdgeBitsF32())
			checkNarrow(t, c, src)
		}
	})
}

func castEdgeBitsF32() []float32 {
	var src []float32
	for _, b := range castEdgeBits {
		src = append(src, math.Float32frombits(b), math.Float32frombits(b|0x80000000))
	}
	return src
}

// TestCastTails runs lengths 0 to 70, from an aligned and an unaligned
// start, checking the results and that nothing past dst[len(dst)-1] is
// written; src is as long as dst, or longer.
func TestCastTails(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const maxN, pad = 70, 20
	halves := make([]uint16, maxN+pad)
	floats := make([]float32, maxN+pad)
	for i := range halves {
		halves[i] = uint16(rng.Uint32())
		if i%3 == 0 {
			floats[i] = math.Float32frombits(castEdgeBits[rng.IntN(len(castEdgeBits))])
		} else {
			floats[i] = float32(rng.NormFloat64() * 100)
		}
	}
	const sentinel = 0x5a5a
	runCastModes(t, func(t *testing.T) {
		for n := range maxN + 1 {
			for _, off := range []int{0, 1, 3} {
				for _, longSrc := range []bool{false, true} {
					end := off + n
					if longSrc {
						end = len(halves)
					}
					for _, c := range widenCases {
						dst := make([]float32, off+n+pad)
						for i := range dst {
							dst[i] = math.Float32frombits(sentinel)
						}
						c.vec(dst[off:off+n], halves[off:end])
						for i := range dst {
							want := uint32(sentinel)
							if i >= off && i < off+n {
								want = math.Float32bits(c.scalar(halves[i]))
							}
							require.Equal(t, want, math.Float32bits(dst[i]), "%s, n %d, offset %d, index %d", c.name, n, off, i)
						}
					}
					for _, c := range narrowCases {
						dst := make([]uint16, off+n+pad)
						for i := range dst {
							dst[i] = sentinel
						}
						c.vec(dst[off:off+n], floats[off:end])
						for i := range dst {
							want := uint16(sentinel)
							if i >= off && i < off+n {
								want = c.scalar(floats[i])
							}
							require.Equal(t, want, dst[i], "%s, n %d, offset %d, index %d", c.name, n, off, i)
						}
					}
				}
			}
		}
	})
}

// TestCastLoadFlush checks that loadRange and flushRange of F16 and BF16
// tensors, which use the vectorised casts, give the scalar conversions'
// bits.
func TestCastLoadFlush(t *testing.T) {
	runCastModes(t, testLoadFlush)
}

func testLoadFlush(t *testing.T) {
	b := New()
	const n = 1000
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
		widen, narrow := kernels.F16ToFloat32, kernels.F16FromFloat32
		if dt == kernels.BF16 {
			widen, narrow = kernels.BF16ToFloat32, kernels.BF16FromFloat32
		}
		x, err := b.Alloc(dt, n)
		require.NoError(t, err)
		s := u16(x)
		for i := range s {
			s[i] = uint16(rng.Uint32())
		}
		buf := make([]float32, n)
		got := loadRange(x, 3, n-5, buf)
		for i, v := range got {
			require.Equal(t, math.Float32bits(widen(s[3+i])), math.Float32bits(v), "%v load, index %d", dt, 3+i)
		}
		vals := make([]float32, n-7)
		for i := range vals {
			vals[i] = math.Float32frombits(rng.Uint32())
		}
		before := append([]uint16(nil), s...)
		flushRange(x, 2, vals)
		for i := range s {
			want := before[i]
			if i >= 2 && i < 2+len(vals) {
				want = narrow(vals[i-2])
			}
			require.Equal(t, want, s[i], "%v flush, index %d", dt, i)
		}
		require.NoError(t, b.Free(x))
	}
}

// FuzzCasts rounds the bytes, read as little-endian float32 bits, to both
// 16-bit types and widens them, read as uint16, comparing each vectorised
// cast with its scalar reference.
func FuzzCasts(f *testing.F) {
	for _, seed := range [][]byte{
		nil,
		{0, 0, 0x80, 0x7f, 1, 0, 0x80, 0xff},
		{0, 0xf0, 0x7f, 0x47, 0, 0, 0x80, 0x33, 0, 0x80, 0, 0},
		make([]byte, 4*37),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !vecmath.CastAvailable {
			t.Skip("no vectorised casts on this CPU")
		}
		floats := make([]float32, len(data)/4)
		for i := range floats {
			floats[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		halves := make([]uint16, len(data)/2)
		for i := range halves {
			halves[i] = binary.LittleEndian.Uint16(data[2*i:])
		}
		old := vecmath.AVX512
		defer func() { vecmath.AVX512 = old }()
		for _, m := range castModes() {
			vecmath.AVX512 = m.avx512
			for _, c := range narrowCases {
				checkNarrow(t, c, floats)
			}
			for _, c := range widenCases {
				checkWiden(t, c, halves)
			}
		}
	})
}

// TestCastsAvailable checks that the vectorised casts run where the
// elementwise kernels' other assembly does.
func TestCastsAvailable(t *testing.T) {
	if vecmath.Available {
		assert.True(t, vecmath.CastAvailable, "AVX-512F without the casts")
	}
}

// BenchmarkCasts times each cast over a million elements, scalar and
// vectorised.
func BenchmarkCasts(b *testing.B) {
	const n = 1 << 20
	rng := rand.New(rand.NewPCG(7, 8))
	halves := make([]uint16, n)
	floats := make([]float32, n)
	for i := range floats {
		floats[i] = float32(rng.NormFloat64())
		halves[i] = kernels.F16FromFloat32(floats[i])
	}
	wide := make([]float32, n)
	narrow := make([]uint16, n)
	var modes []castMode
	if vecmath.CastAvailable {
		modes = castModes()
	}
	for _, c := range widenCases {
		b.Run(c.name+"/scalar", func(b *testing.B) {
			b.SetBytes(6 * n)
			for b.Loop() {
				for i, h := range halves {
					wide[i] = c.scalar(h)
				}
			}
		})
		for _, m := range modes {
			b.Run(c.name+"/"+m.name, func(b *testing.B) {
				old := vecmath.AVX512
				vecmath.AVX512 = m.avx512
				defer func() { vecmath.AVX512 = old }()
				b.SetBytes(6 * n)
				for b.Loop() {
					c.vec(wide, halves)
				}
			})
		}
	}
	for _, c := range narrowCases {
		b.Run(c.name+"/scalar", func(b *testing.B) {
			b.SetBytes(6 * n)
			for b.Loop() {
				for i, f := range floats {
					narrow[i] = c.scalar(f)
				}
			}
		})
		for _, m := range modes {
			b.Run(c.name+"/"+m.name, func(b *testing.B) {
				old := vecmath.AVX512
				vecmath.AVX512 = m.avx512
				defer func() { vecmath.AVX512 = old }()
				b.SetBytes(6 * n)
				for b.Loop() {
					c.vec(narrow, floats)
				}
			})
		}
	}
}

// TestReLUHalfExhaustive checks ReLU on the bits of every binary16 and
// bfloat16 value, scalar and vectorised, against the float32 round trip it
// replaces: widen, max(x, 0), round back (any NaN for a NaN through the
// scalar conversions; the same bits, NaNs included, through vecmath's,
// which quiet a NaN as ReLU16 does), at every tail length and in place.
func TestReLUHalfExhaustive(t *testing.T) {
	for _, tc := range []struct {
		dt     kernels.DType
		widen  func(uint16) float32
		narrow func(float32) uint16
		vw     func([]float32, []uint16)
		vn     func([]uint16, []float32)
	}{
		{kernels.F16, kernels.F16ToFloat32, kernels.F16FromFloat32, vecmath.F16ToF32, vecmath.F32ToF16},
		{kernels.BF16, kernels.BF16ToFloat32, kernels.BF16FromFloat32, vecmath.BF16ToF32, vecmath.F32ToBF16},
	} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			inf, quiet, ok := halfBits(tc.dt)
			require.True(t, ok)
			src := make([]uint16, 1<<16)
			for i := range src {
				src[i] = uint16(i)
			}
			defer func(v bool) { useVecmath = v }(useVecmath)
			paths := map[string][]uint16{}
			for _, vec := range []bool{false, true} {
				if vec && !(vecmath.Available && vecmath.HalfAvailable) {
					continue
				}
				useVecmath = vec
				got := make([]uint16, len(src))
				reluHalf(got, src, inf, quiet)
				for i, h := range src {
					x := tc.widen(h)
					want := tc.narrow(max(x, 0))
					if x != x {
						require.Equal(t, h|quiet, got[i], "vecmath %v: relu(%#04x), a NaN", vec, h)
						require.True(t, tc.widen(want) != tc.widen(want))
						continue
					}
					require.Equal(t, want, got[i], "vecmath %v: relu(%#04x) = %g", vec, h, x)
				}
				// Every tail length from an odd offset, and in place.
				for n := range 70 {
					part := slices.Clone(src[12345 : 12345+n])
					reluHalf(part, part, inf, quiet)
					require.Equal(t, got[12345:12345+n], part, "vecmath %v: %d values in place", vec, n)
				}
				paths[fmt.Sprint(vec)] = got
			}
			if len(paths) == 2 {
				assert.Equal(t, paths["false"], paths["true"])
			}
			if vecmath.CastAvailable && vecmath.Available {
				// The path it replaces, NaN bits included.
				wide, back := make([]float32, len(src)), make([]uint16, len(src))
				tc.vw(wide, src)
				vecmath.ReLU(wide, wide)
				tc.vn(back, wide)
				assert.Equal(t, back, paths[fmt.Sprint(vecmath.HalfAvailable)])
			}
		})
	}
}

// TestAct16Exhaustive checks the 16-bit activations (looked up in
// act16Table's tables) against the float32 round trip they replace, over
// all 65,536 values of each type, bit for bit, NaNs included, with
// vecmath and with the scalar code; then at every tail length, in place.
func TestAct16Exhaustive(t *testing.T) {
	acts := map[string]kernels.Activation{"gelu": kernels.ActGELU, "gelu-tanh": kernels.ActGELUTanh,
		"silu": kernels.ActSiLU, "tanh": kernels.ActTanh}
	defer func(v bool) { useVecmath = v }(useVecmath)
	for _, vec := range []bool{false, true} {
		useVecmath = vec && vecmath.Available
		for name, a := range acts {
			for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
				t.Run(fmt.Sprintf("%s/%v/vecmath=%v", name, dt, useVecmath), func(t *testing.T) {
					f := act16(a, dt)
					require.NotNil(t, f)
					src := make([]uint16, 1<<16)
					for i := range src {
						src[i] = uint16(i)
					}
					// The round trip, by the path loadRange, applyAct and
					// flushRange take.
					wide, want := make([]float32, len(src)), make([]uint16, len(src))
					widen16(dt, wide, src)
					applyAct(wide, wide, a)
					narrow16(dt, want, wide)
					got := make([]uint16, len(src))
					f(got, src)
					for i := range src {
						require.Equal(t, want[i], got[i], "f(%#04x)", src[i])
					}
					for n := range 40 {
						part := slices.Clone(src[30001 : 30001+n])
						f(part, part)
						require.Equal(t, got[30001:30001+n], part, "%d values in place", n)
					}
				})
			}
		}
	}
	assert.Nil(t, act16(kernels.ActNone, kernels.BF16))
	assert.Nil(t, act16(kernels.ActGELU, kernels.F32))
}
