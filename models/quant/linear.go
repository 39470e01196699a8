package quant

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
)

// LinearReport is the quantization error of one linear layer of a model:
// of its weight (the int8 weight dequantized, against the float weight)
// and, when its input is quantized with a static scale fixed by
// calibration, of its input (quantize-dequantize of the last calibration
// batch's values with that scale). With dynamic per-token scales, computed
// from each input as it comes, the input fields are zero.
type LinearReport struct {
	// Name is the layer's Hugging Face name without ".weight", e.g.
	// encoder.layer.0.attention.self.query or
	// model.layers.0.self_attn.q_proj.
	Name                  string
	WeightMSE, WeightSQNR float64
	// InputAmax is the calibration's clipping point (static input scales
	// only).
	InputAmax           float32
	InputMSE, InputSQNR float64 // static input scales only
	// Bytes is the size of the int8 weight and its scales; F32Bytes and
	// F16Bytes that of the weight in float32 and float16.
	Bytes, F32Bytes, F16Bytes int64
}

// QuantizeWeight quantizes w, a float linear weight [out, in] (nn.Linear's
// layout) on be's device, with one scale per output channel, into q's
// dtype: I8 by be's kernels.Quant (Quantize with dynamic per-row scales,
// scale[r] = max |w[r, :]| / 127), or E4M3/E5M2 by its kernels.FP8
// (CastFP8Rows: each row's current scale, scale[r] its inverse); either
// way w ≈ q·scale, scale F32 [out]. It returns the report of the weight
// named name: the error of q·scale against w (dequantized by the device's
// Dequantize for int8, by the FP8 codes' values on the host) and the
// sizes. The input fields are left for the caller. be must have the ops
// of q's dtype; errors name the weight.
func QuantizeWeight(be kernels.Backend, q, scale, w *kernels.Tensor, name string) (LinearReport, error) {
	r := LinearReport{Name: name}
	shape := w.Shape()
	if len(shape) != 2 {
		return r, fmt.Errorf("quant: %s: weight of shape %v, want [out in]: %w", name, shape, kernels.ErrShape)
	}
	out, in := shape[0], shape[1]
	got, err := quantizeRows(be, q, scale, w)
	if err != nil {
		return r, fmt.Errorf("quant: %s: %w", name, err)
	}
	ref, err := kernels.ToFloat32(w)
	if err != nil {
		return r, fmt.Errorf("quant: %s: %w", name, err)
	}
	e, err := Measure(ref, got)
	if err != nil {
		return r, fmt.Errorf("quant: %s: %w", name, err)
	}
	r.WeightMSE, r.WeightSQNR = e.MSE, e.SQNR
	r.Bytes = q.Bytes() + scale.Bytes()
	r.F32Bytes, r.F16Bytes = int64(out*in*4), int64(out*in*2)
	return r, nil
}

// quantizeRows quantizes w into q per row (see QuantizeWeight) and returns
// q·scale.
func quantizeRows(be kernels.Backend, q, scale, w *kernels.Tensor) ([]float32, error) {
	if q.DType() != kernels.I8 {
		fo, err := kernels.Group[kernels.FP8](be)
		if err != nil {
			return nil, err
		}
		if err := fo.CastFP8Rows(q, scale, w); err != nil {
			return nil, err
		}
		codes, err := kernels.ToFloat32(q)
		if err != nil {
			return nil, err
		}
		inv, err := kernels.ToFloat32(scale)
		if err != nil {
			return nil, err
		}
		in := w.Shape().Last()
		for i := range codes {
			codes[i] *= inv[i/in]
		}
		return codes, nil
	}
	qo, err := kernels.Group[kernels.Quant](be)
	if err != nil {
		return nil, err
	}
	if err := qo.Quantize(q, scale, w, true); err != nil {
		return nil, err
	}
	deq, err := be.Alloc(kernels.F32, w.Shape()...)
	if err != nil {
		return nil, err
	}
	err = qo.Dequantize(deq, q, scale)
	var got []float32
	if err == nil {
		got, err = kernels.ToFloat32(deq)
	}
	return got, errors.Join(err, be.Free(deq))
}
