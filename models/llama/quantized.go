package llama

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

// Quantized checkpoints, in the compressed-tensors layout that vLLM and
// llm-compressor read and write. A config.json with a quantization_config
// (quant.ParseConfig sets Config.Quant) has every linear module of every
// decoder layer (q_proj … down_proj) stored per its scheme, with the
// embeddings, norms and lm_head in floating point:
//
//   - w8a8, dynamic per-token inputs ("int-quantized"): X.weight I8 [out,
//     in] and X.weight_scale [out, 1], run as Model.Quantize's modules;
//   - w8a16 and w4a16 ("pack-quantized"): X.weight_packed I32 [out, in/4]
//     or [out, in/8], X.weight_scale [out, 1] or [out, in/group] and
//     X.weight_shape [2], run as Model.QuantizeWeights' modules. The codes
//     are packed from the low bits up, each offset to unsigned (code+128,
//     code+8), which for int4 is kernels.WInt4's own byte layout.
//
//   - fp8, dynamic per-token inputs ("float-quantized", llm-compressor's
//     FP8_DYNAMIC): X.weight F8_E4M3 [out, in] and X.weight_scale [out, 1],
//     run as Model.QuantizeFP8's modules;
//   - nf4: bitsandbytes' layout (quant.NF4), which Hugging Face
//     transformers writes: X.weight U8 (high nibble first),
//     X.weight.absmax, X.weight.quant_map and the quant_state JSON, run
//     as Model.QuantizeWeights' NF4 modules.
//
// Scales may be stored in any float dtype; they are held in float32.
// Load reads such a checkpoint and Model.QuantizedTensors writes one.

// quantIgnored are the Linear modules a quantized Llama keeps in floating
// point: its quantization_config's "ignore".
var quantIgnored = []string{"lm_head"}

// QuantIgnored returns the ignore list of a quantized Llama's
// quantization_config.
func QuantIgnored() []string { return slices.Clone(quantIgnored) }

// parseQuantization reads config.json's quantization_config, accepting
// what Load runs: w8a8 or fp8 with dynamic per-token inputs, w8a16, w4a16
// in groups of a multiple of 32, or bitsandbytes' nf4, with lm_head (and
// nothing else) left in floating point.
func parseQuantization(raw json.RawMessage) (*quant.Spec, error) {
	s, err := quant.ParseConfig("", raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrConfig)
	}
	switch {
	case s.Scheme == quant.W8A8 && !s.Dynamic:
		return nil, fmt.Errorf("quantization_config: w8a8 with static input scales is not supported (Llama runs w8a8 with dynamic per-token input scales): %w", ErrConfig)
	case s.Scheme == quant.W4A16 && s.Group%32 != 0:
		return nil, fmt.Errorf("quantization_config: w4a16 group_size %d is not supported (want a multiple of 32): %w", s.Group, ErrConfig)
	}
	for _, n := range s.Ignore {
		if n != "lm_head" && n != "re:.*lm_head" {
			return nil, fmt.Errorf("quantization_config: ignore lists %q; this model quantizes every decoder layer's linear modules and only lm_head may stay in floating point: %w", n, ErrConfig)
		}
	}
	if len(s.Ignore) == 0 && s.Scheme != quant.NF4 { // bitsandbytes leaves lm_head out by default
		return nil, fmt.Errorf("quantization_config: ignore is empty, so lm_head would be quantized; this model keeps lm_head in floating point: %w", ErrConfig)
	}
	return &s, nil
}

// moduleNames are the names (without ".weight") of the linear modules of
// every decoder layer, in the checkpoint's order.
func (c Config) moduleNames() []string {
	var l layer
	var names []string
	for i := range c.NumHiddenLayers {
		for _, mod := range l.modules() {
			names = append(names, layerParam(i, mod.name))
		}
	}
	return names
}

// floatParams are the parameters a quantized checkpoint keeps in floating
// point, and the shapes of the quantized modules' weights by module name.
func (c Config) floatParams() ([]nn.Param, map[string][]int) {
	quantized := map[string]bool{}
	for _, n := range c.moduleNames() {
		quantized[n+".weight"] = true
	}
	var float []nn.Param
	mods := map[string][]int{}
	for _, p := range c.Params() {
		if quantized[p.Name] {
			mods[strings.TrimSuffix(p.Name, ".weight")] = p.Shape
		} else {
			float = append(float, p)
		}
	}
	return float, mods
}

// loadQuantized uploads a quantized checkpoint into s: the float
// parameters in dt, and each module's codes and scales, returned as the
// module's linear by name.
func loadQuantized(be kernels.Backend, s *nn.TensorSet, cfg Config, src nn.Source, dt kernels.DType) (map[string]linear, error) {
	spec := cfg.Quant
	ck, ok := src.(*nn.Checkpoint)
	if !ok {
		return nil, fmt.Errorf("llama: the config is quantized (%s): its weights must come from its checkpoint: %w", spec.Scheme, ErrInput)
	}
	format, weightOnly := spec.Scheme.WeightOnly()
	fp8 := spec.Scheme == quant.FP8
	if _, err := kernels.Group[kernels.FP8](be); fp8 && err != nil {
		return nil, fmt.Errorf("llama: the checkpoint is %s: %w", spec.Scheme, err)
	}
	if _, err := kernels.Group[kernels.Quant](be); !weightOnly && !fp8 && err != nil {
		return nil, fmt.Errorf("llama: the checkpoint is %s: %w", spec.Scheme, err)
	}
	if _, err := kernels.Group[kernels.WeightQuant](be); weightOnly && err != nil {
		return nil, fmt.Errorf("llama: the checkpoint is %s: %w", spec.Scheme, err)
	}
	float, mods := cfg.floatParams()
	for _, p := range float {
		if err := nn.LoadParam(s, ck, p, dt); err != nil {
			return nil, err
		}
	}
	lins := map[string]linear{}
	for _, n := range cfg.moduleNames() {
		out, in := mods[n][0], mods[n][1]
		var lin linear
		var err error
		switch {
		case fp8:
			lin, err = loadCodes(s, ck, n, kernels.E4M3, out, in)
		case spec.Scheme == quant.NF4:
			lin, err = loadNF4(s, ck, n, out, in)
		case weightOnly:
			lin, err = loadWeightOnly(s, ck, n, format, spec.Group, out, in)
		default:
			lin, err = loadCodes(s, ck, n, kernels.I8, out, in)
		}
		if err != nil {
			return nil, err
		}
		lins[n] = lin
	}
	return lins, ck.CheckUnused()
}

// loadScales reads module n's weight_scale of shape, checked finite and
// positive, into s as F32 of shape up.
func loadScales(s *nn.TensorSet, ck *nn.Checkpoint, n string, shape []int, up ...int) (*kernels.Tensor, error) {
	return loadScaleTensor(s, ck, n+".weight_scale", n+".weight_scale", false, shape, up...)
}

// loadScaleTensor reads the scales stored as name, of shape, checked
// finite and positive (or zero, when zero is set), into s as F32 of shape
// up, named as.
func loadScaleTensor(s *nn.TensorSet, ck *nn.Checkpoint, name, as string, zero bool, shape []int, up ...int) (*kernels.Tensor, error) {
	v, err := checkScales(ck, name, zero, shape)
	if err != nil {
		return nil, err
	}
	return s.Upload(as, kernels.F32, v, up...)
}

// checkScales reads the scales stored as name, of shape, checked finite
// and positive (or zero, when zero is set).
func checkScales(ck *nn.Checkpoint, name string, zero bool, shape []int) ([]float32, error) {
	v, err := ck.Values(nn.Param{Name: name, Shape: shape})
	if err != nil {
		return nil, err
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || x < 0 || x == 0 && !zero {
			return nil, fmt.Errorf("llama: %s[%d] = %v, want a finite positive scale: %w", name, i, x, nn.ErrWeights)
		}
	}
	return v, nil
}

// loadNF4 reads module n [out, in] of a bitsandbytes NF4 checkpoint
// (quant.NF4).
func loadNF4(s *nn.TensorSet, ck *nn.Checkpoint, n string, out, in int) (linear, error) {
	w := n + ".weight"
	stName := w + ".quant_state.bitsandbytes__nf4"
	stShape, err := ck.Shape(stName)
	if err != nil {
		return linear{}, err
	}
	st, err := ck.Tensor(nn.Param{Name: stName, Shape: stShape}, "U8")
	if err != nil {
		return linear{}, err
	}
	state, err := quant.ParseBNBQuantState(stName, st.Data, out, in)
	if err != nil {
		return linear{}, fmt.Errorf("llama: %w: %w", err, nn.ErrWeights)
	}
	qmap, err := ck.Values(nn.Param{Name: w + ".quant_map", Shape: []int{16}})
	if err != nil {
		return linear{}, err
	}
	for i, v := range qmap {
		if math.Abs(float64(v-kernels.NF4Levels[i])) > 1e-6 {
			return linear{}, fmt.Errorf("llama: %s.quant_map[%d] = %v, NF4's level is %v: %w", w, i, v, kernels.NF4Levels[i], nn.ErrWeights)
		}
	}
	codes, err := ck.Tensor(nn.Param{Name: w, Shape: []int{out * in / 2, 1}}, "U8")
	if err != nil {
		return linear{}, err
	}
	group := state.BNBGroup(in)
	qw := &kernels.QWeight{Format: kernels.WNF4, Group: group}
	if qw.Data, err = s.UploadBytes(w, kernels.I8, quant.SwapNibbles(codes.Data), out, in/2); err != nil {
		return linear{}, err
	}
	absmax, err := checkScales(ck, w+".absmax", true, []int{(out*in + state.BlockSize - 1) / state.BlockSize})
	if err != nil {
		return linear{}, err
	}
	qw.Scales, err = s.Upload(n+".weight_scale", kernels.F32, state.BNBScales(absmax, out, in), out, in/group)
	return linear{WO: qw}, err
}

// loadCodes reads module n [out, in] of a w8a8 (I8) or fp8 (E4M3)
// checkpoint: its codes and the scale of each output channel.
func loadCodes(s *nn.TensorSet, ck *nn.Checkpoint, n string, codes kernels.DType, out, in int) (linear, error) {
	name, err := safetensors.DTypeName(codes)
	if err != nil {
		return linear{}, err
	}
	w, err := ck.Tensor(nn.Param{Name: n + ".weight", Shape: []int{out, in}}, name)
	if err != nil {
		return linear{}, err
	}
	q, err := s.UploadBytes(n+".weight", codes, w.Data, out, in)
	if err != nil {
		return linear{}, err
	}
	scale, err := loadScales(s, ck, n, []int{out, 1}, out)
	return linear{Q: &layers.Quantized{W: q, Scale: scale}}, err
}

// loadWeightOnly reads the packed module n [out, in] in format f.
func loadWeightOnly(s *nn.TensorSet, ck *nn.Checkpoint, n string, f kernels.WeightFormat, group, out, in int) (linear, error) {
	perWord := 32 / f.Bits()
	if in%perWord != 0 || f == kernels.WInt4 && in%group != 0 {
		return linear{}, fmt.Errorf("llama: %s: in_features %d is not a multiple of the group (%d) and of the %d codes of a packed word: %w",
			n, in, group, perWord, nn.ErrWeights)
	}
	shape, err := ck.Tensor(nn.Param{Name: n + ".weight_shape", Shape: []int{2}}, "I32", "I64")
	if err != nil {
		return linear{}, err
	}
	if got, err := shape.Int32(); err != nil || !slices.Equal(got, []int32{int32(out), int32(in)}) {
		return linear{}, fmt.Errorf("llama: %s.weight_shape is %v, the config wants [%d %d]: %w", n, got, out, in, errors.Join(nn.ErrWeights, err))
	}
	packed, err := ck.Tensor(nn.Param{Name: n + ".weight_packed", Shape: []int{out, in / perWord}}, "I32")
	if err != nil {
		return linear{}, err
	}
	codes := packed.Data // kernels.WInt4's bytes as they are
	if f == kernels.WInt8 {
		codes = make([]byte, len(packed.Data))
		for i, b := range packed.Data {
			codes[i] = b ^ 0x80 // code+128 → code
		}
	}
	qw := &kernels.QWeight{Format: f}
	if qw.Data, err = s.UploadBytes(n+".weight", kernels.I8, codes, out, len(codes)/out); err != nil {
		return linear{}, err
	}
	scaleShape, up := []int{out, 1}, []int{out}
	if f == kernels.WInt4 {
		qw.Group = group
		scaleShape, up = []int{out, in / group}, []int{out, in / group}
	}
	qw.Scales, err = loadScales(s, ck, n, scaleShape, up...)
	return linear{WO: qw}, err
}

// setQuantized gives the model's modules the linears of a quantized
// checkpoint.
func (m *Model) setQuantized(lins map[string]linear) {
	for i := range m.w.layers {
		for _, mod := range m.w.layers[i].modules() {
			*mod.lin = lins[layerParam(i, mod.name)]
			m.quantized++
		}
	}
	switch m.Config.Quant.Scheme {
	case quant.FP8:
		m.codes = kernels.E4M3
	case quant.W8A8:
		m.codes = kernels.I8
	}
	m.stored = weightCodes{bits: 8}
	if f, ok := m.Config.Quant.Scheme.WeightOnly(); ok {
		m.stored = weightCodes{bits: f.Bits(), group: m.Config.Quant.Group}
	}
}

// QuantizedTensors returns the tensors of a quantized model's checkpoint
// in the compressed-tensors layout above (the float parameters in their
// device dtype); quant.NewConfig(*m.Config.Quant) is its config's
// quantization_config (bitsandbytes' for NF4, whose tensors are in its
// layout: quant.NF4).
func (m *Model) QuantizedTensors() ([]safetensors.Tensor, error) {
	if !m.Quantized() {
		return nil, fmt.Errorf("llama: the model is not quantized: %w", ErrInput)
	}
	if m.Config.Quant == nil {
		return nil, fmt.Errorf("llama: the model's quantization has no checkpoint layout: %w", kernels.ErrUnsupported)
	}
	var out []safetensors.Tensor
	add := func(name string, t *kernels.Tensor, shape ...int) ([]byte, error) {
		dt, err := safetensors.DTypeName(t.DType())
		if err != nil {
			return nil, fmt.Errorf("llama: %s: %w", name, err)
		}
		buf := make([]byte, t.Bytes())
		if err := m.be.Download(buf, t); err != nil {
			return nil, fmt.Errorf("llama: %s: %w", name, err)
		}
		if shape == nil {
			shape = t.Shape()
		}
		out = append(out, safetensors.Tensor{Name: name, DType: dt, Shape: shape, Data: buf})
		return buf, nil
	}
	float, _ := m.Config.floatParams()
	for _, p := range float {
		if _, err := add(p.Name, m.params.Get(p.Name)); err != nil {
			return nil, err
		}
	}
	for i := range m.w.layers {
		for _, mod := range m.w.layers[i].modules() {
			n, lin := layerParam(i, mod.name), mod.lin
			if lin.WO == nil {
				if _, err := add(n+".weight", lin.Q.W); err != nil {
					return nil, err
				}
				if _, err := add(n+".weight_scale", lin.Q.Scale, lin.Q.Scale.Shape()[0], 1); err != nil {
					return nil, err
				}
				continue
			}
			qw := lin.WO
			if qw.Format == kernels.WNF4 {
				if err := m.nf4Tensors(&out, n, qw); err != nil {
					return nil, err
				}
				continue
			}
			rows := qw.Data.Shape()[0]
			cols := qw.Data.Shape()[1] * 8 / qw.Format.Bits()
			buf, err := add(n+".weight_packed", qw.Data, rows, qw.Data.Shape()[1]/4)
			if err != nil {
				return nil, err
			}
			out[len(out)-1].DType = "I32"
			if qw.Format == kernels.WInt8 {
				for j := range buf {
					buf[j] ^= 0x80
				}
			}
			scaleShape := qw.Scales.Shape()
			if len(scaleShape) == 1 {
				scaleShape = []int{scaleShape[0], 1}
			}
			if _, err := add(n+".weight_scale", qw.Scales, scaleShape...); err != nil {
				return nil, err
			}
			shape := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(rows)), uint64(cols))
			out = append(out, safetensors.Tensor{Name: n + ".weight_shape", DType: "I64", Shape: []int{2}, Data: shape})
		}
	}
	return out, nil
}

// TorchDType is config.json's torch_dtype of a precision (F32, F16 or
// BF16; "" for another).
func TorchDType(p nn.Precision) string {
	return map[nn.Precision]string{nn.F32: "float32", nn.F16: "float16", nn.BF16: "bfloat16"}[p]
}

// nf4Tensors appends module n's tensors in bitsandbytes' layout
// (quant.NF4) to out.
func (m *Model) nf4Tensors(out *[]safetensors.Tensor, n string, qw *kernels.QWeight) error {
	rows, in := qw.Data.Shape()[0], qw.Data.Shape()[1]*2
	codes := make([]byte, qw.Data.Bytes())
	if err := m.be.Download(codes, qw.Data); err != nil {
		return fmt.Errorf("llama: %s: %w", n, err)
	}
	scales := make([]byte, qw.Scales.Bytes())
	if err := m.be.Download(scales, qw.Scales); err != nil {
		return fmt.Errorf("llama: %s: %w", n, err)
	}
	levels := make([]byte, 0, 64)
	for _, v := range kernels.NF4Levels {
		levels = binary.LittleEndian.AppendUint32(levels, math.Float32bits(v))
	}
	state, err := json.Marshal(quant.BNBQuantState{QuantType: "nf4", BlockSize: qw.Group, DType: TorchDType(m.Precision), Shape: []int{rows, in}})
	if err != nil {
		return err
	}
	w := n + ".weight"
	*out = append(*out,
		safetensors.Tensor{Name: w, DType: "U8", Shape: []int{rows * in / 2, 1}, Data: quant.SwapNibbles(codes)},
		safetensors.Tensor{Name: w + ".absmax", DType: "F32", Shape: []int{rows * in / qw.Group}, Data: scales},
		safetensors.Tensor{Name: w + ".quant_map", DType: "F32", Shape: []int{16}, Data: levels},
		safetensors.Tensor{Name: w + ".quant_state.bitsandbytes__nf4", DType: "U8", Shape: []int{len(state)}, Data: state})
	return nil
}
