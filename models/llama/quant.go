package llama

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
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
func (m *Model) Quantized() bool { return m.quantized > 0 }

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
	if _, err := kernels.Group[kernels.Quant](m.be); err != nil {
		return nil, fmt.Errorf("llama: %w", err)
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
// its input quantized per token, releases its float weight and reports
// its error.
func (m *Model) quantizeLinear(lin *linear, name string, codes kernels.DType) (quant.LinearReport, error) {
	r, err := lin.Quantize(m.be, m.params, name, codes, nil)
	if err != nil { // the module stays in floating point
		return r, fmt.Errorf("llama: %w", err)
	}
	m.quantized++
	m.codes = codes
	m.stored.bits, m.stored.group = 8, 0
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
	if _, err := kernels.Group[kernels.WeightQuant](m.be); err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	for i := range m.w.layers {
		for _, mod := range m.w.layers[i].modules() {
			if in := mod.lin.W.Shape()[1]; f != kernels.WInt8 && (group <= 0 || group%32 != 0 || in%group != 0) {
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
	r, err := lin.QuantizeWeightOnly(m.params, name, f, group)
	if err != nil {
		return r, fmt.Errorf("llama: %w", err)
	}
	m.quantized++
	m.stored.bits, m.stored.group = f.Bits(), group
	return r, nil
}

// SetWeightOnly gives the decoder layers' linear modules, and lm_head where
// it is not tied to the embedding, weights already quantized in
// weight-only format f (group values per scale for the 4-bit formats), as
// a GGUF file holds them: packed returns a module's codes and scales in
// kernels.QWeight's layout, by the module's weight's name and shape
// [out, in], or nil codes to leave it in floating point. The float weights it replaces are
// released. It returns the number of modules set; the model is quantized
// once one is (Quantize and QuantizeWeights then refuse it).
func (m *Model) SetWeightOnly(f kernels.WeightFormat, group int, packed func(name string, out, in int) ([]byte, []float32, error)) (int, error) {
	if m.Quantized() {
		return 0, fmt.Errorf("llama: the model is already quantized: %w", ErrInput)
	}
	if _, err := kernels.Group[kernels.WeightQuant](m.be); err != nil {
		return 0, fmt.Errorf("llama: %w", err)
	}
	n := 0
	for i := range m.w.layers {
		for _, mod := range m.w.layers[i].modules() {
			name := layerParam(i, mod.name)
			shape := mod.lin.W.Shape()
			codes, scales, err := packed(name+".weight", shape[0], shape[1])
			if err != nil {
				return n, err
			}
			if codes == nil {
				continue
			}
			if err := mod.lin.SetWeightOnly(m.params, name, f, group, codes, scales); err != nil {
				return n, fmt.Errorf("llama: %w", err)
			}
			m.quantized++
			m.stored.bits, m.stored.group = f.Bits(), group
			m.stored.half = mod.lin.WO.Scales.DType() == kernels.F16
			n++
		}
	}
	if m.Config.TieWordEmbeddings {
		return n, nil // the embedding's lookups need it in floating point
	}
	shape := m.w.head.W.Shape()
	codes, scales, err := packed(lmHead, shape[0], shape[1])
	if err != nil || codes == nil {
		return n, err
	}
	if err := m.w.head.SetWeightOnly(m.params, "lm_head", f, group, codes, scales); err != nil {
		return n, fmt.Errorf("llama: %w", err)
	}
	m.quantized++
	m.stored.headBits, m.stored.headGroup = f.Bits(), group
	m.stored.headHalf = m.w.head.WO.Scales.DType() == kernels.F16
	return n + 1, nil
}

// newScratch allocates the scratch of a step's quantized modules over n
// rows: each module input's codes (one buffer per input width: hidden,
// attention and intermediate), the tokens' scales, and the product a
// residual is added to ([n, H] in the model's dtype).
func (m *Model) newScratch(a *nn.Allocator, dt kernels.DType, n int) *layers.Scratch {
	c := m.Config
	codes := m.codes
	if codes == 0 {
		codes = kernels.I8
	}
	return layers.NewScratch(a, codes, dt, n, []int{c.HiddenSize, c.QDim(), c.IntermediateSize}, []int{c.HiddenSize}, true)
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
