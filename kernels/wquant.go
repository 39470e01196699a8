package kernels

import "fmt"

// WeightQuant is the op group of weight-only quantized linear layers, the
// memory-bound decode of large language models: float activations times
// weights stored in int8 or 4 bits, dequantized on the fly inside the
// product (never expanded in memory). A backend adopts it by implementing
// WMatMul; kerneltest's WeightQuant tests are its conformance suite.
// Callers get it with Group, whose error names the backend and the group
// where it is absent.
type WeightQuant interface {
	// WMatMul sets out [rows…, N] = x [rows…, K] · Wᵀ + bias, where
	//
	//	W[n, k] = w.Format.Levels()[code(n, k)] · scale(n, k)
	//
	// is the dequantized weight (see QWeight), summed in float32 and
	// rounded once to out's dtype, which is x's (F32, F16 or BF16). bias,
	// optional, is F32 [N].
	WMatMul(out, x *Tensor, w QWeight, bias *Tensor) error
}

// WeightFormat is how a weight-only quantized matrix stores its values.
type WeightFormat uint8

// Weight formats.
const (
	// WInt8 is int8 codes, symmetric, one scale per output row:
	// W[n, k] = code·Scales[n].
	WInt8 WeightFormat = iota + 1
	// WInt4 is 4-bit signed codes in [−8, 7] (stored as code+8), one
	// scale per group of Group values along K: symmetric int4 with scale
	// amax/7 per group (GPTQ's and AWQ's storage with a fixed zero point
	// of 8), group 128 by default.
	WInt4
	// WNF4 is 4-bit indices into NF4Levels with one absmax scale per
	// group (bitsandbytes' NF4, block size 64 by default).
	WNF4
)

// NF4Levels are the 16 values of the 4-bit NormalFloat type of QLoRA, as
// bitsandbytes defines them: quantiles of N(0, 1) scaled to [−1, 1], with
// an exact zero.
var NF4Levels = [16]float32{
	-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
	-0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0,
	0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
	0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
}

// String names the format as benchmark names and flags write it.
func (f WeightFormat) String() string {
	switch f {
	case WInt8:
		return "int8"
	case WInt4:
		return "int4"
	case WNF4:
		return "nf4"
	}
	return fmt.Sprintf("format(%d)", f)
}

// Bits is the width of one code.
func (f WeightFormat) Bits() int {
	if f == WInt8 {
		return 8
	}
	return 4
}

// Levels are the values of the 16 codes of a 4-bit format before the
// scale: code−8 for WInt4, NF4Levels for WNF4 (WInt8 has none).
func (f WeightFormat) Levels() [16]float32 {
	if f == WNF4 {
		return NF4Levels
	}
	var l [16]float32
	for i := range l {
		l[i] = float32(i - 8)
	}
	return l
}

// QWeight is a weight-only quantized matrix of N rows (output features)
// of K values (input features): nn.Linear's [out, in].
type QWeight struct {
	Format WeightFormat
	// Data is I8: [N, K] codes for WInt8; [N, K/2] bytes for the 4-bit
	// formats, two codes per byte, element 2j in the low nibble and 2j+1
	// in the high one.
	Data *Tensor
	// Scales is F32: [N, K/Group], or [N] for WInt8 per channel. WInt8
	// in groups may hold them in F16 instead, as GGUF's Q8_0 blocks do.
	Scales *Tensor
	// Group is the number of values along K sharing a scale: a positive
	// multiple of 32 dividing K. WInt8 takes 0 for one scale per row
	// (per channel) or groups (GGUF's Q8_0: 32).
	Group int
}
