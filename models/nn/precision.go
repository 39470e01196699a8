package nn

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
)

// Precision is the arithmetic of a model on its device.
type Precision uint8

// Precisions.
const (
	F32 Precision = iota + 1
	F16
	BF16
	// Mixed keeps weights, linear layers, layer norms and the feed-forward
	// network in float32 and runs the attention core (q·kᵀ, softmax, ·v)
	// in float16.
	Mixed
)

// precisions are the valid precisions, in the order flags list them.
var precisions = []Precision{F32, F16, BF16, Mixed}

// String is the name used in benchmark names and flags.
func (p Precision) String() string {
	switch p {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	case Mixed:
		return "mixed"
	}
	return fmt.Sprintf("precision(%d)", p)
}

// Valid reports whether p is one of the precisions above.
func (p Precision) Valid() bool { return p >= F32 && p <= Mixed }

// ParsePrecision parses f32, f16, bf16 or mixed.
func ParsePrecision(s string) (Precision, error) {
	for _, p := range precisions {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown precision %q (want f32, f16, bf16 or mixed)", s)
}

// DType is the dtype of the weights and activations.
func (p Precision) DType() kernels.DType {
	switch p {
	case F16:
		return kernels.F16
	case BF16:
		return kernels.BF16
	}
	return kernels.F32
}

// AttnDType is the dtype of the attention core: float16 for Mixed, DType
// otherwise.
func (p Precision) AttnDType() kernels.DType {
	if p == Mixed {
		return kernels.F16
	}
	return p.DType()
}
