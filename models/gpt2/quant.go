package gpt2

import (
	"fmt"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/quant"
)

// INT8 inference of the blocks: W8A8 with dynamic per-token activation
// scales (compressed-tensors' "w8a8 dynamic"). Every linear layer of every
// block (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) keeps its weight
// in int8 with one scale per output channel; its input is quantized as it
// comes, one scale per token, with no calibration. The products run in
// int8 with exact int32 sums (kernels.Quant), rescaled in float32 and
// stored in the model's dtype. The embeddings, the layer norms, the
// attention core and lm_head (the token embeddings) stay in floating
// point.

// Quantized reports whether the blocks' linear layers run in int8.
func (m *Model) Quantized() bool { return m.quantized }

// Quantize converts every block's linear layers to int8 weights with one
// scale per output channel, computed on the device (layers.Linear's
// Quantize), and releases their float weights; forward passes then
// quantize each layer's input per token. It returns one report per layer
// in the checkpoint's order (the weight's error and sizes; the input
// fields are zero, as nothing is calibrated). The backend must implement
// kernels.Quant; Forwards made before must be made again.
//
// After an error the layers converted so far stay in int8 and the others
// in floating point, and Quantize may not be called again.
func (m *Model) Quantize() ([]quant.LinearReport, error) {
	if m.quantized {
		return nil, fmt.Errorf("gpt2: the model is already quantized: %w", ErrInput)
	}
	if _, err := kernels.Group[kernels.Quant](m.be); err != nil {
		return nil, fmt.Errorf("gpt2: %w", err)
	}
	m.quantized = true
	var reports []quant.LinearReport
	for i := range m.w.blocks {
		for _, l := range m.w.blocks[i].linears(i) {
			r, err := l.lin.Quantize(m.be, m.params, l.name, kernels.I8, nil)
			if err != nil {
				return nil, fmt.Errorf("gpt2: %w", err)
			}
			reports = append(reports, r)
		}
	}
	return reports, nil
}
