package gguf

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/nn"
)

// Rounded is an nn.Source of a Llama model's parameters as a GGUF file of
// one type that WriteLlama writes holds them, without writing the file:
// each parameter quantized by Quantize in its StorageType and read back
// by Dequantize. A model loaded from it is the one loaded from the file
// (the file's q and k rows are permuted, but blocks run along rows, so
// they round alike).
type Rounded struct {
	src nn.Source
	typ Type
}

// NewRounded returns src's parameters rounded through type t (F32, F16,
// BF16, Q8_0 or Q4_0, the types Quantize writes).
func NewRounded(src nn.Source, t Type) (*Rounded, error) {
	if _, ok := encoders[t]; !ok {
		return nil, fmt.Errorf("gguf: cannot round weights through type %s (want F32, F16, BF16, Q8_0 or Q4_0): %w", t, ErrUnsupported)
	}
	return &Rounded{src: src, typ: t}, nil
}

// Values implements nn.Source: the parameter's values as the file holds
// them, dequantized to float32.
func (r *Rounded) Values(p nn.Param) ([]float32, error) {
	st := StorageType(p.Shape, r.typ)
	data, v, err := r.quantize(p, st)
	if err != nil {
		return nil, err
	}
	if err := Dequantize(st, v, data); err != nil {
		return nil, fmt.Errorf("gguf: parameter %s: %w", p.Name, err)
	}
	return v, nil
}

// WInt4 is Llama.WInt4 for the rounded weights: the named weight [out,
// in] as kernels.WInt4 codes in groups of 32 and their scales when it is
// stored as Q4_0, and nil otherwise.
func (r *Rounded) WInt4(param string, out, in int) ([]byte, []float32, error) {
	return r.repack(param, out, in, Q4_0, wint4FromQ4_0)
}

// WInt8 is Llama.WInt8 for the rounded weights: the named weight [out,
// in] as kernels.WInt8 codes in groups of 32 and their scales when it is
// stored as Q8_0, and nil otherwise.
func (r *Rounded) WInt8(param string, out, in int) ([]byte, []float32, error) {
	return r.repack(param, out, in, Q8_0, wint8FromQ8_0)
}

// repack returns the named weight [out, in] in type t repacked by
// convert, when it is stored in t, and nil otherwise.
func (r *Rounded) repack(param string, out, in int, t Type, convert func([]byte, int) ([]byte, []float32)) ([]byte, []float32, error) {
	p := nn.Param{Name: param, Shape: []int{out, in}}
	if StorageType(p.Shape, r.typ) != t {
		return nil, nil, nil
	}
	data, _, err := r.quantize(p, t)
	if err != nil {
		return nil, nil, err
	}
	codes, scales := convert(data, out*in/qk)
	return codes, scales, nil
}

// quantize returns the parameter's bytes in type t, and its values from
// the source.
func (r *Rounded) quantize(p nn.Param, t Type) ([]byte, []float32, error) {
	v, err := r.src.Values(p)
	if err != nil {
		return nil, nil, err
	}
	data, err := Quantize(t, v)
	if err != nil {
		return nil, nil, fmt.Errorf("gguf: parameter %s: %w", p.Name, err)
	}
	return data, v, nil
}

// BlockSource is a Llama model's weights whose Q4_0 and Q8_0 tensors
// WInt4 and WInt8 give as weight-only codes: a Llama file or a Rounded
// source.
type BlockSource interface {
	nn.Source
	WInt4(param string, out, in int) ([]byte, []float32, error)
	WInt8(param string, out, in int) ([]byte, []float32, error)
}

// LoadLlama loads cfg's model from src on dev in precision p, the Q4_0
// weights of the decoder layers and lm_head on the weight-only int4
// kernels (group 32, the codes and scales as they are) where dev has
// them, or else, on the CPU, their Q8_0 weights on the int8 kernels in
// groups of 32 (the CUDA kernels take one int8 scale per row);
// everything else is dequantized to p.
func LoadLlama(dev kernels.Backend, cfg llama.Config, src BlockSource, p nn.Precision) (*llama.Model, error) {
	m, err := llama.Load(dev, cfg, src, p)
	if err != nil {
		return nil, err
	}
	if _, err := kernels.Group[kernels.WeightQuant](dev); err != nil {
		return m, nil
	}
	n, err := m.SetWeightOnly(kernels.WInt4, Q4_0.BlockSize(), src.WInt4)
	if err == nil && n == 0 && dev.Info().Kind == kernels.CPU {
		_, err = m.SetWeightOnly(kernels.WInt8, Q8_0.BlockSize(), src.WInt8)
	}
	if err != nil {
		return nil, errors.Join(err, m.Close())
	}
	return m, nil
}
