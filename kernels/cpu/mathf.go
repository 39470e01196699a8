package cpu

import "math"

// Float32 versions of exp and erfc for the elementwise and softmax loops.
// They stay in float32 (no round trip through float64 and the math
// package's slower, correctly rounded paths) and are branch-light so that
// the loops around them run at several elements per nanosecond. Their
// accuracy, a few float32 ulps, is tested against the math package.

const (
	log2e = 1.44269504088896340736
	// ln 2 split so that n·ln2Hi is exact for the |n| ≤ 150 used here.
	ln2Hi = 0.693359375
	ln2Lo = -2.12194440e-4
	// expMax and expMin bound the arguments whose result is a normal float32.
	expMax = 88.72283
	expMin = -87.33654
	// roundMagic is 1.5·2²³: for |v| < 2²² in float32, (v+roundMagic)−roundMagic
	// is v rounded to the nearest integer.
	roundMagic = 12582912
)

// expf returns e^x for float32 x: x = n·ln2 + r with |r| ≤ ln2/2, e^r by its
// Taylor series to degree 7 (truncation below 6e-9 relative), scaled by 2^n
// through the exponent bits. Results below the smallest normal float32
// flush to zero.
func expf(x float32) float32 {
	switch {
	case x > expMax:
		return float32(math.Inf(1))
	case x < expMin:
		return 0
	case x != x:
		return x
	}
	// Adding and removing 1.5·2²³ rounds to the nearest integer in float32
	// arithmetic, with no conversion to float64 and back.
	n := (x*log2e + roundMagic) - roundMagic
	r := x - n*ln2Hi - n*ln2Lo
	// Taylor terms by Estrin's scheme: shorter dependency chains than Horner.
	r2 := r * r
	r4 := r2 * r2
	p01 := 1 + r
	p23 := 0.5 + r*(1.0/6)
	p45 := 1.0/24 + r*(1.0/120)
	p67 := 1.0/720 + r*(1.0/5040)
	p := (p01 + r2*p23) + r4*(p45+r2*p67)
	if n > 127 { // e^x just below expMax: 2^128 is not a float32
		p, n = 2*p, 127
	}
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// erfcf returns erfc(z) for z ≥ 0 with a relative error below 1.2e-7 in
// exact arithmetic: the Chebyshev fit of erfc(z)·e^{z²} in t = 1/(1+z/2)
// from Numerical Recipes (§6.2), evaluated in float32. Rounding z² costs
// up to half an ulp of z² in relative error: 1e-6 up to z = 4 (erfc ≈ 1.5e-8),
// 2e-5 in the far tail, where the values are below 1e-20.
func erfcf(z float32) float32 {
	t := 1 / (1 + 0.5*z)
	// −1.26551223 + 1.00002368t + … + 0.17087277t⁹ by Estrin's scheme.
	t2 := t * t
	t4 := t2 * t2
	p := ((-1.26551223 + 1.00002368*t) + t2*(0.37409196+0.09678418*t)) +
		t4*((-0.18628806+0.27886807*t)+t2*(-1.13520398+1.48851587*t)) +
		t4*t4*(-0.82215223+0.17087277*t)
	return t * expf(p-z*z)
}

// sigmoidf returns 1/(1+e^{−x}) without overflow.
func sigmoidf(x float32) float32 {
	return 1 / (1 + expf(-x))
}
