package layers

import (
	"errors"
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
)

// QuantizeWeight converts w, a float weight whose first dimension is the
// output channels (a linear layer's [out, in], a convolution's [Co, Kh,
// Kw, Ci/G]), to codes (I8, or E4M3 for FP8) with one scale per output
// channel, computed on be's device (quant.QuantizeWeight), and its bias b,
// if any, to float32; the tensors are allocated in params under name
// (without ".weight"), and w and b released. inScale is the input's static
// scale (int8 static) or nil. It returns the quantized weight and its
// report: the weight's error and sizes, the input fields left for the
// caller. After an error w and b are kept and nothing new is.
func QuantizeWeight(be kernels.Backend, params *nn.TensorSet, name string, w, b *kernels.Tensor, codes kernels.DType, inScale *kernels.Tensor) (*Quantized, quant.LinearReport, error) {
	shape := w.Shape()
	co := shape[0]
	k := shape.Len() / co
	q := &Quantized{InScale: inScale}
	var err error
	if q.W, err = params.Alloc(name+".weight", codes, shape...); err != nil {
		return nil, quant.LinearReport{}, err
	}
	if q.Scale, err = params.Alloc(name+".weight_scale", kernels.F32, co); err != nil {
		return nil, quant.LinearReport{}, errors.Join(err, params.Release(q.W))
	}
	release := func(err error) error {
		return errors.Join(err, params.Release(q.W), params.Release(q.Scale), params.Release(q.B))
	}
	// Per output channel: the rows of the [Co, K] views.
	wk, err := w.Reshape(co, k)
	if err != nil {
		return nil, quant.LinearReport{}, release(fmt.Errorf("%s.weight: %w", name, err))
	}
	qk, err := q.W.Reshape(co, k)
	if err != nil {
		return nil, quant.LinearReport{}, release(fmt.Errorf("%s.weight: %w", name, err))
	}
	r, err := quant.QuantizeWeight(be, qk, q.Scale, wk, name)
	if err != nil {
		return nil, r, release(err)
	}
	if b != nil {
		bias, err := kernels.ToFloat32(b)
		if err != nil {
			return nil, r, release(fmt.Errorf("%s.bias: %w", name, err))
		}
		if q.B, err = params.Upload(name+".bias", kernels.F32, bias, co); err != nil {
			return nil, r, release(err)
		}
	}
	// The float weight and bias are not read again.
	if err := errors.Join(params.Release(w), params.Release(b)); err != nil {
		return nil, r, fmt.Errorf("%s: %w", name, err)
	}
	return q, r, nil
}

// Quantize converts l's float weight and bias to codes (I8, or E4M3 for
// FP8) by QuantizeWeight, its input then read with the static scale
// inScale (F32 [1], int8 static) or quantized per token (inScale nil).
func (l *Linear) Quantize(be kernels.Backend, params *nn.TensorSet, name string, codes kernels.DType, inScale *kernels.Tensor) (quant.LinearReport, error) {
	q, r, err := QuantizeWeight(be, params, name, l.W, l.B, codes, inScale)
	if err != nil {
		return r, err
	}
	*l = Linear{Q: q}
	return r, nil
}

// QuantizeWeightOnly converts l's float weight [out, in] to weight-only
// format f (int8 per output channel; int4 per group of group inputs; NF4
// per block), quantized on the host by quant.QuantizeWeightOnly, uploads
// it into params under name and releases the float weight. The layer must
// have no bias. It returns the weight's report (error and bytes).
func (l *Linear) QuantizeWeightOnly(params *nn.TensorSet, name string, f kernels.WeightFormat, group int) (quant.LinearReport, error) {
	r := quant.LinearReport{Name: name}
	if l.B != nil {
		return r, fmt.Errorf("%s has a bias; weight-only products take none: %w", name, kernels.ErrUnsupported)
	}
	shape := l.W.Shape()
	out, in := shape[0], shape[1]
	w, err := kernels.ToFloat32(l.W)
	if err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	data, scales, err := quant.QuantizeWeightOnly(f, w, out, in, group)
	if err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	deq, err := quant.DequantizeWeightOnly(f, data, scales, out, in, group)
	if err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	e, err := quant.Measure(w, deq)
	if err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	codes := make([]byte, len(data))
	for i, c := range data {
		codes[i] = byte(c)
	}
	if f == kernels.WInt8 {
		group = 0 // QuantizeWeightOnly's int8 is per channel
	}
	if err := l.SetWeightOnly(params, name, f, group, codes, scales); err != nil {
		return r, err
	}
	r.WeightMSE, r.WeightSQNR = e.MSE, e.SQNR
	r.Bytes = l.WO.Data.Bytes() + l.WO.Scales.Bytes()
	r.F32Bytes, r.F16Bytes = int64(out*in*4), int64(out*in*2)
	return r, nil
}

// SetWeightOnly makes codes and scales, already in kernels.QWeight's
// layout for format f and group (0 for int8 per channel), l's weight in
// place of its float weight [out, in]: it uploads them into params under
// name and releases the float weight. Int8 in groups (GGUF's Q8_0) keeps
// its scales in float16, as the file does; each must be exact in it. The
// layer must have no bias.
func (l *Linear) SetWeightOnly(params *nn.TensorSet, name string, f kernels.WeightFormat, group int, codes []byte, scales []float32) error {
	if l.B != nil {
		return fmt.Errorf("%s has a bias; weight-only products take none: %w", name, kernels.ErrUnsupported)
	}
	if l.W == nil {
		return fmt.Errorf("%s has no float weight to replace: %w", name, kernels.ErrUnsupported)
	}
	shape := l.W.Shape()
	out, in := shape[0], shape[1]
	perRow, scaleShape := in, []int{out}
	if f != kernels.WInt8 || group != 0 {
		if group <= 0 || in%group != 0 {
			return fmt.Errorf("%s: %d inputs are not whole groups of %d: %w", name, in, group, kernels.ErrShape)
		}
		scaleShape = []int{out, in / group}
		if f != kernels.WInt8 {
			perRow = in / 2
		}
	}
	if len(codes) != out*perRow || len(scales) != kernels.Shape(scaleShape).Len() {
		return fmt.Errorf("%s: %d code bytes and %d scales for a %s weight [%d, %d], want %d and %d: %w",
			name, len(codes), len(scales), f, out, in, out*perRow, kernels.Shape(scaleShape).Len(), kernels.ErrShape)
	}
	scaleType := kernels.F32
	if f == kernels.WInt8 && group > 0 {
		scaleType = kernels.F16
		for i, v := range scales {
			if math.IsInf(float64(v), 0) || kernels.F16ToFloat32(kernels.F16FromFloat32(v)) != v {
				return fmt.Errorf("%s: scale %d (%g) is not a finite float16, which int8 in groups stores: %w", name, i, v, kernels.ErrValue)
			}
		}
	}
	qw := &kernels.QWeight{Format: f, Group: group}
	var err error
	if qw.Data, err = params.UploadBytes(name+".weight", kernels.I8, codes, out, perRow); err != nil {
		return err
	}
	if qw.Scales, err = params.Upload(name+".weight_scale", scaleType, scales, scaleShape...); err != nil {
		return errors.Join(err, params.Release(qw.Data))
	}
	if err := params.Release(l.W); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	*l = Linear{WO: qw}
	return nil
}
