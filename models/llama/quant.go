package llama

import (
	"errors"
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
)

// INT8 inference of the decoder layers: W8A8 with dynamic per-token
// activation scales (SmoothQuant's W8A8 without the smoothing,
// compressed-tensors' "w8a8 dynamic"). Every linear module of every
// decoder layer (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj,
// down_proj) keeps its weight in int8 with one scale per output channel.
// Its input is quantized as it comes, one scale per token (row), with no
// calibration: q, k and v share one quantized copy of their input, gate
// and up another. The products run in int8 with exact int32 sums
// (kernels.Quant), rescaled by the token's and the channel's scales in
// float32 and stored in the model's dtype. The embeddings, the norms,
// rotary embeddings, attention with its KV cache and lm_head stay in
// floating point, in the model's precision.

// Quantized reports whether the model's decoder layers run their linear
// modules in int8.
func (m *Model) Quantized() bool { return m.int8 > 0 }

// Quantize converts the linear modules of every decoder layer to int8
// weights with one scale per output channel, computed on the device from
// the float weights (kernels.Quant's Quantize with dynamic per-row
// scales), and releases the float weights. The forward passes (prefill,
// decode, Forward) then quantize each module's input per token as they
// run. It returns the report of every module in the checkpoint's order
// (the weight's error and sizes; the input fields are zero, as nothing is
// calibrated). The model's backend must implement kernels.Quant; sessions
// opened before must be opened again. Config.Quant then records the
// scheme (w8a8, dynamic), which QuantizedTensors writes.
//
// After an error the modules converted so far stay in int8 and the others
// in floating point: the model still runs, and Quantize may not be called
// again.
func (m *Model) Quantize() ([]quant.LinearReport, error) {
	if m.Quantized() {
		return nil, fmt.Errorf("llama: the model is already quantized: %w", ErrInput)
	}
	if _, ok := m.be.(kernels.Quant); !ok {
		return nil, fmt.Errorf("llama: the %s backend has no int8 ops (kernels.Quant): %w", m.be.Name(), kernels.ErrUnsupported)
	}
	var reports []quant.LinearReport
	for i := range m.w.layers {
		for _, mod := range m.w.layers[i].modules() {
			r, err := m.quantizeLinear(mod.lin, layerParam(i, mod.name), kernels.I8)
			if err != nil {
				return nil, err
			}
			reports = append(reports, r)
		}
	}
	m.Config.Quant = &quant.Spec{Scheme: quant.W8A8, Dynamic: true, Ignore: QuantIgnored()}
	return reports, nil
}

// quantizeLinear converts lin, named name (without ".weight"), to codes
// (I8, or E4M3 for FP8) with a scale per output channel on the device,
// releases its float weight and reports its error.
func (m *Model) quantizeLinear(lin *linear, name string, codes kernels.DType) (quant.LinearReport, error) {
	shape := lin.w.Shape()
	q, err := m.params.Alloc(name+".weight", codes, shape[0], shape[1])
	if err != nil {
		return quant.LinearReport{}, fmt.Errorf("llama: %w", err)
	}
	scale, err := m.params.Alloc(name+".weight_scale", kernels.F32, shape[0])
	if err != nil {
		return quant.LinearReport{}, errors.Join(fmt.Errorf("llama: %w", err), m.params.Release(q))
	}
	r, err := quant.QuantizeWeight(m.be, q, scale, lin.w, name)
	if err != nil { // the module stays in floating point
		return r, errors.Join(fmt.Errorf("llama: %w", err), m.params.Release(q), m.params.Release(scale))
	}
	// The float weight is not read again.
	if err := m.params.Release(lin.w); err != nil {
		return r, fmt.Errorf("llama: %s: %w", name, err)
	}
	*lin = linear{q: q, scale: scale}
	m.int8++
	m.fp8 = codes != kernels.I8
	m.weightBits = 8
	return r, nil
}

// QuantizeWeights converts every linear module of every decoder layer to
// weight-only quantization in format f (kernels.WeightQuant: int8 per
// output channel, int4 per group, NF4 per block; group, the values per
// scale along the input, is ignored for int8), quantized on the host by
// quant.QuantizeWeightOnly, for the memory-bound decode: the activations
// stay in the model's dtype and each weight is dequantized inside the
// product. The float weights are released. It returns one report per
// module (the weight's error and bytes). The backend must implement
// kernels.WeightQuant; a model quantized either way is not quantized
// again. Config.Quant then records the scheme (w8a16, w4a16, nf4).
func (m *Model) QuantizeWeights(f kernels.WeightFormat, group int) ([]quant.LinearReport, error) {
	if m.Quantized() {
		return nil, fmt.Errorf("llama: the model is already quantized: %w", ErrInput)
	}
	if _, ok := m.be.(kernels.WeightQuant); !ok {
		return nil, fmt.Errorf("llama: the %s backend has no weight-only quantized ops (kernels.WeightQuant): %w", m.be.Name(), kernels.ErrUnsupported)
	}
	for i := range m.w.layers {
		for _, mod := range m.w.layers[i].modules() {
			if in := mod.lin.w.Shape()[1]; f != kernels.WInt8 && (group <= 0 || group%32 != 0 || in%group != 0) {
				return nil, fmt.Errorf("llama: %s: %d inputs do not divide into groups of %d (want a positive multiple of 32 that divides every module's inputs): %w",
					layerParam(i, mod.name), in, group, kernels.ErrShape)
			}
		}
	}
	var reports []quant.LinearReport
	for i := range m.w.layers {
		for _, mod := range m.w.layers[i].modules() {
			r, err := m.quantizeWeightOnly(mod.lin, layerParam(i, mod.name), f, group)
			if err != nil {
				return nil, err
			}
			reports = append(reports, r)
		}
	}
	switch f {
	case kernels.WInt8:
		m.Config.Quant = &quant.Spec{Scheme: quant.W8A16, Ignore: QuantIgnored()}
	case kernels.WInt4:
		m.Config.Quant = &quant.Spec{Scheme: quant.W4A16, Group: group, Ignore: QuantIgnored()}
	case kernels.WNF4:
		m.Config.Quant = &quant.Spec{Scheme: quant.NF4, Group: group, Ignore: QuantIgnored()}
	}
	return reports, nil
}

// quantizeWeightOnly converts lin, named name, to format f, releases its
// float weight and reports its error.
func (m *Model) quantizeWeightOnly(lin *linear, name string, f kernels.WeightFormat, group int) (quant.LinearReport, error) {
	r := quant.LinearReport{Name: name}
	shape := lin.w.Shape()
	out, in := shape[0], shape[1]
	w, err := kernels.ToFloat32(lin.w)
	if err != nil {
		return r, fmt.Errorf("llama: %s: %w", name, err)
	}
	data, scales, err := quant.QuantizeWeightOnly(f, w, out, in, group)
	if err != nil {
		return r, fmt.Errorf("llama: %s: %w", name, err)
	}
	deq, err := quant.DequantizeWeightOnly(f, data, scales, out, in, group)
	if err != nil {
		return r, fmt.Errorf("llama: %s: %w", name, err)
	}
	e, err := quant.Measure(w, deq)
	if err != nil {
		return r, fmt.Errorf("llama: %s: %w", name, err)
	}
	codes := make([]byte, len(data))
	for i, c := range data {
		codes[i] = byte(c)
	}
	qw := &kernels.QWeight{Format: f, Group: group}
	if qw.Data, err = m.params.UploadBytes(name+".weight", kernels.I8, codes, out, len(data)/out); err != nil {
		return r, fmt.Errorf("llama: %w", err)
	}
	scaleShape := []int{out}
	if f != kernels.WInt8 {
		scaleShape = append(scaleShape, len(scales)/out)
	}
	if qw.Scales, err = m.params.Upload(name+".weight_scale", kernels.F32, scales, scaleShape...); err != nil {
		return r, errors.Join(fmt.Errorf("llama: %w", err), m.params.Release(qw.Data))
	}
	if err := m.params.Release(lin.w); err != nil {
		return r, fmt.Errorf("llama: %s: %w", name, err)
	}
	*lin = linear{wo: qw}
	m.int8++
	m.weightBits = f.Bits()
	r.WeightMSE, r.WeightSQNR = e.MSE, e.SQNR
	r.Bytes = qw.Data.Bytes() + qw.Scales.Bytes()
	r.F32Bytes, r.F16Bytes = int64(out*in*4), int64(out*in*2)
	return r, nil
}

// int8Bufs are the buffers of a step's int8 modules over N rows: each
// module input quantized per token (I8 [N, width], one per input width:
// hidden, attention and intermediate), the tokens' scales (F32 [N]), and
// the product a residual is added to ([N, H] in the model's dtype).
type int8Bufs struct {
	xq    map[int]*kernels.Tensor
	scale *kernels.Tensor
	sum   *kernels.Tensor
	// cur is the last int8 module's input, quantized: one of xq, or nil
	// before the first and after a module in floating point.
	cur *kernels.Tensor
}

// allocInt8 allocates the int8 (or FP8: codes E4M3) buffers of steps of n
// rows of the model's inputs.
func allocInt8(a *nn.Allocator, c Config, dt, codes kernels.DType, n int) *int8Bufs {
	q := &int8Bufs{xq: map[int]*kernels.Tensor{}, scale: a.Tensor(kernels.F32, n), sum: a.Tensor(dt, n, c.HiddenSize)}
	for _, w := range []int{c.HiddenSize, c.QDim(), c.IntermediateSize} {
		if q.xq[w] == nil {
			q.xq[w] = a.Tensor(codes, n, w)
		}
	}
	return q
}

// inputCodes is the dtype a quantized model's module inputs are cast to:
// E4M3 for FP8 modules, else I8.
func (m *Model) inputCodes() kernels.DType {
	if m.fp8 {
		return kernels.E4M3
	}
	return kernels.I8
}

// projectWeightOnly sets out = in·Wᵀ (adding out's value when residual)
// for a weight-only quantized module: WMatMul, through q.sum and an Add
// when a residual is added.
func (q *int8Bufs) projectWeightOnly(be kernels.Backend, out, in *kernels.Tensor, lin linear, residual bool) error {
	q.cur = nil // the int8 input cache is not this product's
	dst := out
	if residual {
		dst = q.sum
	}
	if err := be.(kernels.WeightQuant).WMatMul(dst, in, *lin.wo, nil); err != nil {
		return err
	}
	if residual {
		return be.Add(out, out, q.sum)
	}
	return nil
}

// project is the projector of an int8 (FP8) module: its input quantized
// per token (kernels.Quant's dynamic Quantize; kernels.FP8's CastFP8Rows)
// unless shared with the previous module, then out = xq·Wqᵀ rescaled by
// the tokens' and the output channels' scales (QMatMul; FP8MatMul),
// through q.sum and an Add when a residual is added.
func (q *int8Bufs) project(be kernels.Backend, out, in *kernels.Tensor, lin linear, residual, shared bool) error {
	// The model has int8 (FP8) modules only on a backend with the ops.
	fp8 := lin.q.DType() != kernels.I8
	width := in.Shape().Last()
	if !shared || q.cur == nil || q.cur.Shape().Last() != width {
		q.cur = q.xq[width]
		if q.cur == nil {
			return fmt.Errorf("no buffer of codes for an input of shape %v: %w", in.Shape(), kernels.ErrShape)
		}
		var err error
		if fp8 {
			err = be.(kernels.FP8).CastFP8Rows(q.cur, q.scale, in)
		} else {
			err = be.(kernels.Quant).Quantize(q.cur, q.scale, in, true)
		}
		if err != nil {
			q.cur = nil
			return fmt.Errorf("quantizing the input: %w", err)
		}
	}
	dst := out
	if residual {
		dst = q.sum
	}
	var err error
	if fp8 {
		err = be.(kernels.FP8).FP8MatMul(dst, q.cur, lin.q, kernels.FP8MatMulParams{AScaleInv: q.scale, BScaleInv: lin.scale})
	} else {
		err = be.(kernels.Quant).QMatMul(dst, q.cur, lin.q, kernels.QMatMulParams{AScale: q.scale, BScale: lin.scale})
	}
	if err != nil {
		return err
	}
	if residual {
		return be.Add(out, out, q.sum)
	}
	return nil
}

// QuantizeFP8 converts the linear modules of every decoder layer to FP8
// E4M3 weights with one scale per output channel (the current scale of
// each row, cast on the device by kernels.FP8's CastFP8Rows), and
// releases the float weights; the forward passes then cast each module's
// input to E4M3 per token as they run and multiply in FP8 with float32
// sums (FP8MatMul). Like Quantize it returns each module's report (the
// weight's error and bytes); the embeddings, norms, attention and lm_head
// stay in floating point. The backend must implement kernels.FP8; a
// quantized model is not quantized again.
func (m *Model) QuantizeFP8() ([]quant.LinearReport, error) {
	if m.Quantized() {
		return nil, fmt.Errorf("llama: the model is already quantized: %w", ErrInput)
	}
	if _, err := kernels.Group[kernels.FP8](m.be); err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	var reports []quant.LinearReport
	for i := range m.w.layers {
		for _, mod := range m.w.layers[i].modules() {
			r, err := m.quantizeLinear(mod.lin, layerParam(i, mod.name), kernels.E4M3)
			if err != nil {
				return nil, err
			}
			reports = append(reports, r)
		}
	}
	m.Config.Quant = &quant.Spec{Scheme: quant.FP8, Dynamic: true, Ignore: QuantIgnored()}
	return reports, nil
}
