package quant

import (
	"encoding/json"
	"fmt"

	"github.com/zbench/zbench/kernels"
)

// NF4 is weight-only 4-bit NormalFloat with one absmax scale per block of
// values (kernels.WNF4), in bitsandbytes' checkpoint layout, which Hugging
// Face transformers reads and writes (compressed-tensors has no NF4): each
// quantized Linear X stores X.weight (U8 [out·in/2, 1], the codes of the
// flattened weight two per byte, the first in the high nibble),
// X.weight.absmax (F32 [out·in/blocksize]), X.weight.quant_map (F32 [16],
// the NF4 levels) and X.weight.quant_state.bitsandbytes__nf4 (U8, the JSON
// of quant_type, blocksize, dtype and shape).
const NF4 Scheme = "nf4"

// bnbConfig is the quantization_config of a bitsandbytes checkpoint.
type bnbConfig struct {
	QuantMethod  string   `json:"quant_method"`
	LoadIn4bit   bool     `json:"load_in_4bit"`
	LoadIn8bit   bool     `json:"load_in_8bit"`
	QuantType    string   `json:"bnb_4bit_quant_type"`
	DoubleQuant  bool     `json:"bnb_4bit_use_double_quant"`
	ComputeDType string   `json:"bnb_4bit_compute_dtype"`
	QuantStorage string   `json:"bnb_4bit_quant_storage"`
	SkipModules  []string `json:"llm_int8_skip_modules"`
}

// newBNBConfig is the quantization_config of an NF4 spec.
func newBNBConfig(s Spec) bnbConfig {
	return bnbConfig{QuantMethod: "bitsandbytes", LoadIn4bit: true, QuantType: "nf4", ComputeDType: "float32",
		QuantStorage: "uint8", SkipModules: append([]string{}, s.Ignore...)}
}

// parseBNB reads a bitsandbytes quantization_config: 4-bit NF4 without
// double quantization, its codes in bytes. bad makes the errors.
func parseBNB(raw json.RawMessage, bad func(field string, got any, want string) error) (Spec, error) {
	var c bnbConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return Spec{}, bad("(bitsandbytes)", err, "bitsandbytes' fields")
	}
	switch {
	case c.LoadIn8bit || !c.LoadIn4bit:
		return Spec{}, bad("load_in_4bit", c.LoadIn4bit, "true (LLM.int8() is not read)")
	case c.QuantType != "nf4":
		return Spec{}, bad("bnb_4bit_quant_type", c.QuantType, "nf4")
	case c.DoubleQuant:
		return Spec{}, bad("bnb_4bit_use_double_quant", true, "false (double-quantized absmax is not read)")
	case c.QuantStorage != "" && c.QuantStorage != "uint8":
		return Spec{}, bad("bnb_4bit_quant_storage", c.QuantStorage, "uint8")
	}
	s := Spec{Scheme: NF4}
	if len(c.SkipModules) > 0 {
		s.Ignore = c.SkipModules
	}
	return s, nil
}

// BNBQuantState is the JSON in a bitsandbytes weight's
// quant_state.bitsandbytes__nf4 tensor.
type BNBQuantState struct {
	QuantType string `json:"quant_type"`
	BlockSize int    `json:"blocksize"`
	DType     string `json:"dtype"`
	Shape     []int  `json:"shape"`
}

// ParseBNBQuantState reads a quant_state tensor's bytes (name is the
// tensor, for errors) for a weight of shape [out, in]: NF4 in blocks of the
// flattened weight. A block may span two rows; the groups that
// kernels.WNF4 takes inside a row (BNBGroup) must be a multiple of 32.
func ParseBNBQuantState(name string, data []byte, out, in int) (BNBQuantState, error) {
	var q BNBQuantState
	if err := json.Unmarshal(data, &q); err != nil {
		return q, fmt.Errorf("%s: %v: %w", name, err, kernels.ErrValue)
	}
	switch {
	case q.QuantType != "nf4":
		return q, fmt.Errorf("%s: quant_type %q, want nf4: %w", name, q.QuantType, kernels.ErrValue)
	case len(q.Shape) != 2 || q.Shape[0] != out || q.Shape[1] != in:
		return q, fmt.Errorf("%s: shape %v, the config wants [%d %d]: %w", name, q.Shape, out, in, kernels.ErrValue)
	case q.BlockSize <= 0 || q.BNBGroup(in)%32 != 0:
		return q, fmt.Errorf("%s: blocksize %d over rows of %d inputs: the groups inside a row (%d values) must be a multiple of 32: %w",
			name, q.BlockSize, in, q.BNBGroup(in), kernels.ErrValue)
	}
	return q, nil
}

// BNBGroup is the group of kernels.WNF4 that holds q's blocks over rows of
// in values: the largest that divides both, so that none spans two
// blocks or two rows.
func (q BNBQuantState) BNBGroup(in int) int {
	a, b := q.BlockSize, in
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// BNBScales expands the absmax of q's blocks over a weight [out, in] into
// one scale per group of BNBGroup values of each row, [out, in/group].
func (q BNBQuantState) BNBScales(absmax []float32, out, in int) []float32 {
	g := q.BNBGroup(in)
	scales := make([]float32, out*in/g)
	for i := range scales {
		r, c := i/(in/g), i%(in/g)
		scales[i] = absmax[(r*in+c*g)/q.BlockSize]
	}
	return scales
}

// SwapNibbles returns data with the two 4-bit codes of every byte
// exchanged: bitsandbytes' order (first value high) to kernels.WNF4's
// (first value low), or back.
func SwapNibbles(data []byte) []byte {
	out := make([]byte, len(data))
	for i, b := range data {
		out[i] = b<<4 | b>>4
	}
	return out
}
