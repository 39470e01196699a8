package cpu

import (
	"math"
	"sync"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/cpu/internal/vecmath"
)

// useVecmath selects the assembly of package vecmath (AVX-512 or AVX2+FMA)
// in applyAct and the assembly exponential in softmaxRow; the scalar Go
// below is the fallback elsewhere and the reference the tests compare with.
var useVecmath = vecmath.Available

// ewBlock is the number of elements an elementwise op widens to float32 at a
// time: small enough for the stack, large enough to amortise the calls.
const ewBlock = 512

// Constants of the GELU forms.
const (
	invSqrt2    = 0.70710678118654752440 // 1/√2
	invSqrt2Pi  = 0.39894228040143267794 // 1/√(2π)
	sqrt2OverPi = 0.79788456080286535588 // √(2/π)
	geluCoef    = 0.044715
)

// gelu is x·Φ(x) with the exact error function, written with erfc so that
// the negative tail keeps its relative accuracy: Φ(x) = erfc(−x/√2)/2.
func gelu(x float32) float32 {
	z := x * invSqrt2
	if z >= 0 {
		return x - 0.5*x*erfcf(z)
	}
	return 0.5 * x * erfcf(-z)
}

// geluGrad is d/dx x·Φ(x) = Φ(x) + x·φ(x).
func geluGrad(x float32) float32 {
	v := float64(x)
	return float32(0.5*(1+math.Erf(v*invSqrt2)) + v*invSqrt2Pi*math.Exp(-0.5*v*v))
}

// geluTanh is 0.5·x·(1+tanh(u)), u = √(2/π)·(x+0.044715x³), computed as
// x·σ(2u), the same function without the cancellation of 1+tanh.
func geluTanh(x float32) float32 {
	return x * sigmoidf(2*sqrt2OverPi*(x+geluCoef*x*x*x))
}

// geluTanhGrad is the derivative of geluTanh.
func geluTanhGrad(x float32) float32 {
	v := float64(x)
	t := math.Tanh(sqrt2OverPi * (v + geluCoef*v*v*v))
	return float32(0.5*(1+t) + 0.5*v*(1-t*t)*sqrt2OverPi*(1+3*geluCoef*v*v))
}

// silu is x·σ(x).
func silu(x float32) float32 { return x * sigmoidf(x) }

// siluGrad is σ(x)·(1 + x·(1−σ(x))).
func siluGrad(x float32) float32 {
	v := float64(x)
	s := 1 / (1 + math.Exp(-v))
	return float32(s * (1 + v*(1-s)))
}

// tanhAct is tanh(x), through float64's correctly rounded math.Tanh: no
// cancellation near 0, and ±1 at the ends.
func tanhAct(x float32) float32 { return float32(math.Tanh(float64(x))) }

// tanhGrad is 1 − tanh²(x).
func tanhGrad(x float32) float32 {
	t := math.Tanh(float64(x))
	return float32(1 - t*t)
}

// actCost is the work per element of activation a, in elements, for
// parallelFor: 1 for none and ReLU, 16 for those that call erf, tanh or exp.
func actCost(a kernels.Activation) int {
	if a == kernels.ActNone || a == kernels.ActReLU {
		return 1
	}
	return 16
}

// applyAct sets dst[i] = a(src[i]); dst and src have the same length and may
// be the same slice. The switch is outside the loops so that each loop is a
// plain call of an inlinable scalar function.
func applyAct(dst, src []float32, a kernels.Activation) {
	src = src[:len(dst)]
	switch a {
	case kernels.ActNone:
		copy(dst, src)
	case kernels.ActReLU:
		if useVecmath {
			vecmath.ReLU(dst, src)
			return
		}
		for i, x := range src {
			dst[i] = max(x, 0) // branch-free: random signs defeat the predictor
		}
	case kernels.ActGELU:
		if useVecmath {
			vecmath.GELU(dst, src)
			return
		}
		for i, x := range src {
			dst[i] = gelu(x)
		}
	case kernels.ActGELUTanh:
		if useVecmath {
			vecmath.GELUTanh(dst, src)
			return
		}
		for i, x := range src {
			dst[i] = geluTanh(x)
		}
	case kernels.ActSiLU:
		if useVecmath {
			vecmath.SiLU(dst, src)
			return
		}
		for i, x := range src {
			dst[i] = silu(x)
		}
	case kernels.ActTanh:
		for i, x := range src {
			dst[i] = tanhAct(x)
		}
	}
}

// applyActGrad sets dx[i] = dy[i]·a'(x[i]); the slices have the same length
// and dx may alias dy or x.
func applyActGrad(dx, dy, x []float32, a kernels.Activation) {
	dy, x = dy[:len(dx)], x[:len(dx)]
	switch a {
	case kernels.ActNone:
		copy(dx, dy)
	case kernels.ActReLU:
		for i, v := range x {
			if v > 0 {
				dx[i] = dy[i]
			} else {
				dx[i] = 0
			}
		}
	case kernels.ActGELU:
		for i, v := range x {
			dx[i] = dy[i] * geluGrad(v)
		}
	case kernels.ActGELUTanh:
		for i, v := range x {
			dx[i] = dy[i] * geluTanhGrad(v)
		}
	case kernels.ActSiLU:
		for i, v := range x {
			dx[i] = dy[i] * siluGrad(v)
		}
	case kernels.ActTanh:
		for i, v := range x {
			dx[i] = dy[i] * tanhGrad(v)
		}
	}
}

// loadRange returns t's elements [lo, hi) as float32: a view of the storage for
// F32, else widened into buf, which must hold hi−lo values.
func loadRange(t *kernels.Tensor, lo, hi int, buf []float32) []float32 {
	if t.DType() == kernels.F32 {
		return f32(t)[lo:hi]
	}
	buf = buf[:hi-lo]
	switch t.DType() {
	case kernels.F16, kernels.BF16:
		widen16(t.DType(), buf, u16(t)[lo:hi])
	case kernels.E4M3, kernels.E5M2:
		table := fp8Values(t.DType())
		for i, c := range bytesOf(t)[lo:hi] {
			buf[i] = table[c]
		}
	default:
		sz := t.DType().Size()
		_ = kernels.DecodeFloat32(t.DType(), buf, bytesOf(t)[lo*sz:hi*sz]) // sizes match by construction
	}
	return buf
}

// widen16 sets dst[i] to the float32 of the 16-bit float src[i] of dtype
// dt (F16 or BF16): vecmath's casts where they run, the scalar ones
// elsewhere.
func widen16(dt kernels.DType, dst []float32, src []uint16) {
	src = src[:len(dst)]
	switch {
	case vecmath.CastAvailable && dt == kernels.F16:
		vecmath.F16ToF32(dst, src)
	case vecmath.CastAvailable:
		vecmath.BF16ToF32(dst, src)
	case dt == kernels.F16:
		for i, h := range src {
			dst[i] = kernels.F16ToFloat32(h)
		}
	default:
		for i, h := range src {
			dst[i] = kernels.BF16ToFloat32(h)
		}
	}
}

// narrow16 sets dst[i] to src[i] rounded to the 16-bit float dtype dt (F16
// or BF16), ties to even: vecmath's casts where they run, the scalar ones
// elsewhere.
func narrow16(dt kernels.DType, dst []uint16, src []float32) {
	src = src[:len(dst)]
	switch {
	case vecmath.CastAvailable && dt == kernels.F16:
		vecmath.F32ToF16(dst, src)
	case vecmath.CastAvailable:
		vecmath.F32ToBF16(dst, src)
	case dt == kernels.F16:
		for i, v := range src {
			dst[i] = kernels.F16FromFloat32(v)
		}
	default:
		for i, v := range src {
			dst[i] = kernels.BF16FromFloat32(v)
		}
	}
}

// destRange returns where the new values of t's elements [lo, hi) are computed:
// the storage itself for F32, else buf (hi−lo values), which flushRange then
// rounds into t.
func destRange(t *kernels.Tensor, lo, hi int, buf []float32) []float32 {
	if t.DType() == kernels.F32 {
		return f32(t)[lo:hi]
	}
	return buf[:hi-lo]
}

// flushRange rounds vals into t's elements starting at lo; for F32 vals is the
// storage (from destRange) and nothing is done.
func flushRange(t *kernels.Tensor, lo int, vals []float32) {
	switch t.DType() {
	case kernels.F32:
	case kernels.F16, kernels.BF16:
		narrow16(t.DType(), u16(t)[lo:lo+len(vals)], vals)
	default:
		sz := t.DType().Size()
		_ = kernels.EncodeFloat32(t.DType(), bytesOf(t)[lo*sz:(lo+len(vals))*sz], vals) // sizes match by construction
	}
}

// mapRows runs f over the rows of x, rows of d values, in parallel (cost
// the work per row, for parallelFor). f gets row r of x as float32 (a view
// of the storage for F32, else widened into a worker's buffer) and dst,
// where it computes row r of out (the storage for F32, else a buffer that
// mapRows rounds into out): no whole-tensor float32 copies. Rows shorter
// than ewBlock are widened and rounded ewBlock/d at a time, so that short
// rows (attention scores at seq 128) do not pay two casts' calls each.
func mapRows(out, x *kernels.Tensor, rows, d, cost int, f func(r int, dst, row []float32)) {
	per := max(1, ewBlock/d) // rows per cast
	parallelFor(rows, cost, func(lo, hi int) {
		var xb, ob []float32
		if x.DType() != kernels.F32 {
			xb = make([]float32, per*d)
		}
		if out.DType() != kernels.F32 {
			ob = make([]float32, per*d)
		}
		for r0 := lo; r0 < hi; r0 += per {
			r1 := min(r0+per, hi)
			dst := destRange(out, r0*d, r1*d, ob)
			src := loadRange(x, r0*d, r1*d, xb)
			for r := r0; r < r1; r++ {
				i := (r - r0) * d
				f(r, dst[i:i+d], src[i:i+d])
			}
			flushRange(out, r0*d, dst)
		}
	})
}

// ewScratch is a worker's buffers for the inputs of one block, which
// loadRange widens 16-bit values into.
type ewScratch struct{ a, b [ewBlock]float32 }

// in is the buffer for f's input i (0 or 1) of mapBlocks; nil where
// mapBlocks passes no scratch (F32 throughout), where loadRange needs none.
func (sc *ewScratch) in(i int) []float32 {
	switch {
	case sc == nil:
		return nil
	case i == 0:
		return sc.a[:]
	}
	return sc.b[:]
}

// mapBlocks runs f over out's elements in parallel, ewBlock elements at a
// time: f computes the new values of [lo, hi) into dst (widening its inputs
// with loadRange into sc's buffers, which the worker's blocks share), and
// mapBlocks rounds them into out. cost is the work per element, in
// elements, for parallelFor. in lists f's inputs where f reads them only
// through loadRange and uses sc for nothing else: when they and out are all
// F32, f gets each goroutine's range whole, views of the storage, in one
// call (no per-block calls for a streaming op to pay).
func mapBlocks(out *kernels.Tensor, cost int, f func(dst []float32, lo, hi int, sc *ewScratch), in ...*kernels.Tensor) {
	whole := len(in) > 0 && out.DType() == kernels.F32
	for _, t := range in {
		whole = whole && t.DType() == kernels.F32
	}
	if whole {
		dst := f32(out)
		parallelFor(out.Len(), cost, func(lo, hi int) { f(dst[lo:hi], lo, hi, nil) })
		return
	}
	parallelFor(out.Len(), cost, func(lo, hi int) {
		var buf [ewBlock]float32
		var sc ewScratch
		for s := lo; s < hi; s += ewBlock {
			e := min(s+ewBlock, hi)
			dst := destRange(out, s, e, buf[:])
			f(dst, s, e, &sc)
			flushRange(out, s, dst)
		}
	})
}

// Add sets out = a + b, where b has a's shape or a suffix of it and is then
// repeated over a's leading dimensions.
func (b *Backend) Add(out, a, bt *kernels.Tensor) error {
	n, period, err := check.Add("cpu: add", b, out, a, bt)
	if err != nil {
		return err
	}
	if period == n {
		mapBlocks(out, 1, func(dst []float32, lo, hi int, sc *ewScratch) {
			x, y := loadRange(a, lo, hi, sc.in(0)), loadRange(bt, lo, hi, sc.in(1))
			y = y[:len(x)]
			for i, v := range x {
				dst[i] = v + y[i]
			}
		}, a, bt)
		return nil
	}
	y := in32(bt)
	mapBlocks(out, 1, func(dst []float32, lo, hi int, sc *ewScratch) {
		x := loadRange(a, lo, hi, sc.in(0))
		j := lo % period
		for i, v := range x {
			dst[i] = v + y[j]
			if j++; j == period {
				j = 0
			}
		}
	}, a)
	return nil
}

// Scale sets out = s·x.
func (b *Backend) Scale(out, x *kernels.Tensor, s float32) error {
	if _, err := check.Scale("cpu: scale", b, out, x, s); err != nil {
		return err
	}
	mapBlocks(out, 1, func(dst []float32, lo, hi int, sc *ewScratch) {
		for i, v := range loadRange(x, lo, hi, sc.in(0)) {
			dst[i] = s * v
		}
	}, x)
	return nil
}

// Fill sets every element of out, of any dtype, to v rounded to that dtype.
func (b *Backend) Fill(out *kernels.Tensor, v float32) error {
	if _, err := check.Fill("cpu: fill", b, out, v); err != nil {
		return err
	}
	buf := bytesOf(out)
	sz := out.DType().Size()
	_ = kernels.EncodeFloat32(out.DType(), buf[:sz], []float32{v}) // sizes match by construction
	// Double the filled prefix until the buffer is full: a few memmoves.
	for n := sz; n < len(buf); n *= 2 {
		copy(buf[n:], buf[:n])
	}
	return nil
}

// Cast converts x into out, which has x's shape and any dtype: values are
// widened to float32 and rounded to out's dtype as kernels.EncodeFloat32
// does (ties to even, saturating for integers and FP8).
func (b *Backend) Cast(out, x *kernels.Tensor) error {
	if _, err := check.Cast("cpu: cast", b, out, x); err != nil {
		return err
	}
	if out.DType() == x.DType() {
		copy(bytesOf(out), bytesOf(x))
		return nil
	}
	mapBlocks(out, 1, func(dst []float32, lo, hi int, sc *ewScratch) {
		xb := &sc.a
		copy(dst, loadRange(x, lo, hi, xb[:]))
	})
	return nil
}

// Act sets out = a(x) elementwise.
func (b *Backend) Act(out, x *kernels.Tensor, a kernels.Activation) error {
	if _, err := check.Act("cpu: act", b, out, x, a); err != nil {
		return err
	}
	if f := act16(a, x.DType()); f != nil {
		dst, src := u16(out), u16(x)
		parallelFor(len(dst), 1, func(lo, hi int) { f(dst[lo:hi], src[lo:hi]) })
		return nil
	}
	mapBlocks(out, actCost(a), func(dst []float32, lo, hi int, sc *ewScratch) {
		applyAct(dst, loadRange(x, lo, hi, sc.in(0)), a)
	}, x)
	return nil
}

// act16 returns activation a on the 16-bit values of dtype dt, with the
// same bits as applyAct's float32 round trip and without it: ReLU on the
// bits (reluHalf), and every other activation but ActNone by looking each
// value up in the activation's table (act16Table); nil where dt is not F16
// or BF16.
func act16(a kernels.Activation, dt kernels.DType) func(dst, src []uint16) {
	inf, quiet, ok := halfBits(dt)
	switch {
	case !ok || a == kernels.ActNone:
		return nil
	case a == kernels.ActReLU:
		return func(dst, src []uint16) { reluHalf(dst, src, inf, quiet) }
	}
	t := act16Table(a, dt)
	return func(dst, src []uint16) { lookup16(dst, src, t) }
}

// act16Key names one of act16Table's tables: the activation, the dtype,
// and whether applyAct ran vecmath's functions when it was built.
type act16Key struct {
	a   kernels.Activation
	dt  kernels.DType
	vec bool
}

// act16Tables holds the tables act16Table has built, by act16Key.
var act16Tables sync.Map

// act16Table returns the table of activation a on the 16-bit float type
// dt: entry h is what the float32 round trip (widen16, applyAct, narrow16)
// gives for the value whose bits are h, for all 65,536 bit patterns,
// computed once and shared. A 16-bit input has so few values that looking
// its result up (128 KiB, which stays in L2) is exact and cheaper than
// computing it: GELU's erfc, exponential and division are tens of
// operations a value, the lookup two loads and a store.
func act16Table(a kernels.Activation, dt kernels.DType) *[1 << 16]uint16 {
	k := act16Key{a, dt, useVecmath}
	if t, ok := act16Tables.Load(k); ok {
		return t.(*[1 << 16]uint16)
	}
	t := new([1 << 16]uint16)
	for h := range t {
		t[h] = uint16(h)
	}
	wide := make([]float32, len(t))
	widen16(dt, wide, t[:])
	applyAct(wide, wide, a)
	narrow16(dt, t[:], wide)
	v, _ := act16Tables.LoadOrStore(k, t)
	return v.(*[1 << 16]uint16)
}

// lookup16 sets dst[i] = t[src[i]]; dst may be src. Four values an
// iteration keep four independent loads in flight.
func lookup16(dst, src []uint16, t *[1 << 16]uint16) {
	src = src[:len(dst)]
	i := 0
	for ; i+4 <= len(src); i += 4 {
		s, d := src[i:i+4:i+4], dst[i:i+4:i+4]
		d[0], d[1], d[2], d[3] = t[s[0]], t[s[1]], t[s[2]], t[s[3]]
	}
	for ; i < len(src); i++ {
		dst[i] = t[src[i]]
	}
}

// halfBits returns the bits of +Inf and the quiet bit of NaNs of the 16-bit
// float type dt, and whether dt is one (F16 or BF16).
func halfBits(dt kernels.DType) (inf, quiet uint16, ok bool) {
	switch dt {
	case kernels.F16:
		return 0x7c00, 0x0200, true
	case kernels.BF16:
		return 0x7f80, 0x0040, true
	}
	return 0, 0, false
}

// reluHalf sets dst[i] = ReLU of the 16-bit float src[i] (binary16 or
// bfloat16, whose +Inf and quiet bit are inf and quiet) on the bits, as
// widening to float32, ReLU and rounding back give it: src[i] where its
// sign bit is clear, +0 where it is set, and src[i] quieted where it is a
// NaN. dst may be src.
func reluHalf(dst, src []uint16, inf, quiet uint16) {
	if useVecmath && vecmath.HalfAvailable {
		vecmath.ReLU16(dst, src, inf, quiet)
		return
	}
	src = src[:len(dst)]
	for i, h := range src {
		switch {
		case h&0x7fff > inf:
			dst[i] = h | quiet
		case h&0x8000 != 0:
			dst[i] = 0
		default:
			dst[i] = h
		}
	}
}

// ActBackward sets dx = dy·a'(x) elementwise.
func (b *Backend) ActBackward(dx, dy, x *kernels.Tensor, a kernels.Activation) error {
	if _, err := check.ActBackward("cpu: actbackward", b, dx, dy, x, a); err != nil {
		return err
	}
	mapBlocks(dx, actCost(a), func(dst []float32, lo, hi int, sc *ewScratch) {
		applyActGrad(dst, loadRange(dy, lo, hi, sc.in(0)), loadRange(x, lo, hi, sc.in(1)), a)
	}, dy, x)
	return nil
}

// SumRows sets out[n] = Σ x[…, n] over all leading positions of x, summing
// in float64.
func (b *Backend) SumRows(out, x *kernels.Tensor) error {
	rows, n, err := check.SumRows("cpu: sumrows", b, out, x)
	if err != nil {
		return err
	}
	if n >= 256 || rows*n < 2*grain {
		// Wide rows: each goroutine sums its own band of columns.
		parallelFor(n, rows, func(lo, hi int) {
			acc := make([]float64, hi-lo)
			buf := make([]float32, hi-lo)
			for r := range rows {
				for j, v := range loadRange(x, r*n+lo, r*n+hi, buf) {
					acc[j] += float64(v)
				}
			}
			dst := destRange(out, lo, hi, buf)
			for j, s := range acc {
				dst[j] = float32(s)
			}
			flushRange(out, lo, dst)
		})
		return nil
	}
	// Narrow rows: split the rows into a fixed number of bands, sum each in
	// parallel and add the partial sums in order (deterministic).
	bands := min(rows, 64)
	partial := make([][]float64, bands)
	parallelFor(bands, rows/bands*n, func(lo, hi int) {
		buf := make([]float32, n)
		for k := lo; k < hi; k++ {
			acc := make([]float64, n)
			for r := k * rows / bands; r < (k+1)*rows/bands; r++ {
				for j, v := range loadRange(x, r*n, r*n+n, buf) {
					acc[j] += float64(v)
				}
			}
			partial[k] = acc
		}
	})
	var buf [256]float32
	dst := destRange(out, 0, n, buf[:])
	for j := range dst {
		var s float64
		for _, p := range partial {
			s += p[j]
		}
		dst[j] = float32(s)
	}
	flushRange(out, 0, dst)
	return nil
}
