package kernels

// DecoderBackward is the op group of training a decoder-only model (Llama
// and its family): the gradients of RMSNorm and of the SwiGLU gate, and
// dropout with a mask that a backward pass regenerates from its seed instead
// of storing. A backend adopts it by implementing every method; kerneltest's
// DecoderBackward tests are its conformance suite (skipped for a backend
// without it). Callers get it with Group, whose error names the backend and
// the group where it is absent.
//
// Float tensors of one call share a dtype (F32, F16 or BF16); arithmetic
// is in float32, row sums in float32 or wider, and results are rounded
// once to the output's dtype. Outputs are overwritten, never accumulated
// into. Which outputs may be inputs is stated per method; other overlaps
// are not allowed (the same tensor where it is not allowed is an error
// wrapping ErrValue; other overlaps are not detected).
type DecoderBackward interface {
	// RMSNormBackward sets dx to the gradient of x through
	// out = RMSNorm(x, gamma, eps) (Ops.RMSNorm: out = x·r·gamma with
	// r = 1/sqrt(mean(x²)+eps) over each row of D) given dy:
	//
	//	dx_j = r·gamma_j·dy_j − x_j·r³/D · Σ_k dy_k·gamma_k·x_k
	//
	// and, when dgamma is not nil, dgamma_j = Σ_rows dy_j·x_j·r
	// (overwritten). r is recomputed from x. x, dy and dx share a float
	// dtype and the shape [rows…, D]; gamma and dgamma are [D] of that
	// dtype. dx may be dy (in place); nothing else may overlap. The sum
	// over rows is deterministic: the same call gives the same dgamma.
	RMSNormBackward(dx, dgamma, dy, x, gamma *Tensor, eps float32) error
	// SwiGLUBackward is the gradient of out = silu(gate)·up
	// (Decoder.SwiGLU) given dy:
	//
	//	dgate = dy·up·silu'(gate),  silu'(g) = σ(g)·(1 + g·(1−σ(g)))
	//	dup   = dy·silu(gate)
	//
	// All five tensors share a float dtype and a shape. It is elementwise:
	// dgate and dup may each be one of dy, gate and up (each element's
	// inputs are read before its outputs are written), but not the same
	// tensor as each other.
	SwiGLUBackward(dgate, dup, dy, gate, up *Tensor) error
	// Dropout sets out = x·m/(1−p), with the keep mask m_i = DropoutKeep(
	// seed, i, p) a pure function of the seed and the flat element index
	// i, so that the backward pass regenerates it by calling Dropout on
	// the gradient with the same seed. The scale s = float32(1/(1−p)) (the
	// quotient in float64) multiplies x in float32, rounded once to out's
	// dtype; a dropped element is 0. p must lie in [0, 1), else the error
	// wraps ErrValue; p = 0 copies x. out has x's float dtype and shape
	// and may be x.
	Dropout(out, x *Tensor, p float32, seed uint64) error
}

// DropoutScale is the factor Dropout multiplies the kept elements by:
// float32(1/(1−p)) with the quotient in float64.
func DropoutScale(p float32) float32 { return float32(1 / (1 - float64(p))) }

// DropoutKeep reports whether Dropout keeps element i under seed: u ≥ p
// with u = DropoutUniform(seed, i). Every element is kept when p is 0.
func DropoutKeep(seed uint64, i int, p float32) bool { return DropoutUniform(seed, i) >= p }

// DropoutUniform is the uniform number in [0, 1) of element i under seed,
// splitmix64's finaliser of z = seed + (uint64(i)+1)·0x9E3779B97F4A7C15
// (arithmetic mod 2⁶⁴):
//
//	z = (z ^ z>>30)·0xBF58476D1CE4E5B9
//	z = (z ^ z>>27)·0x94D049BB133111EB
//	z = z ^ z>>31
//
// and u = float32(z>>40)·2⁻²⁴, the top 24 bits (exact in float32). The
// CUDA kernels compute the same numbers.
func DropoutUniform(seed uint64, i int) float32 {
	z := seed + (uint64(i)+1)*0x9E3779B97F4A7C15
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	z ^= z >> 31
	return float32(z>>40) * (1.0 / (1 << 24))
}
