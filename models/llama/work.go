package llama

// Work is the arithmetic and the least memory traffic of one model
// operation, for throughput figures and the roofline.
type Work struct {
	FLOPs float64 // multiply-adds count 2
	Bytes float64 // every weight read once, the cache read and written once
}

// layerMACs is the multiply-adds of one token through one layer's
// projections and MLP: its linear weights' element count.
func (c Config) layerMACs() float64 {
	H, I := float64(c.HiddenSize), float64(c.IntermediateSize)
	return 2*H*float64(c.QDim()) + 2*H*float64(c.KVDim()) + 3*H*I
}

// layerChannels is the output channels of one layer's linear modules:
// the scales of its int8 weights.
func (c Config) layerChannels() float64 {
	return float64(c.QDim() + 2*c.KVDim() + 2*c.HiddenSize + 2*c.IntermediateSize)
}

// linearBytes is the size of the weights a step reads in full: every
// layer's projections, MLP and norms, the final norm and lm_head (one row
// of the embedding table per token is counted separately), in a dtype of
// dtSize bytes, or with the projections and MLP quantized to codes of
// bits bits (8, or 4 for the weight-only 4-bit formats; 0 for none), and
// lm_head to codes of headBits bits, each with a float32 scale per output
// channel (the 4-bit formats' group scales, one per 32 values or more,
// are not counted: the figure stays a lower bound).
func (c Config) linearBytes(dtSize, bits, headBits int) float64 {
	H, V, dt := float64(c.HiddenSize), float64(c.VocabSize), float64(dtSize)
	linears := dt * c.layerMACs()
	if bits > 0 {
		linears = c.layerMACs()*float64(bits)/8 + 4*c.layerChannels()
	}
	head := dt * V * H
	if headBits > 0 {
		head = V*H*float64(headBits)/8 + 4*V
	}
	perLayer := linears + dt*2*H
	return float64(c.NumHiddenLayers)*perLayer + dt*H + head
}

// PrefillWork is a prefill of batch prompts of seq tokens into an empty
// cache, with the logits of each prompt's last token, in a dtype of
// dtSize bytes.
func (c Config) PrefillWork(batch, seq, dtSize int) Work {
	return c.prefillWork(batch, seq, dtSize, 0, 0)
}

// PrefillWork is Config.PrefillWork for the model: in its dtype, with the
// linear modules' weights as quantized once it is (int8, or 4 bits).
func (m *Model) PrefillWork(batch, seq int) Work {
	return m.Config.prefillWork(batch, seq, m.Precision.DType().Size(), m.weightBits, m.headBits)
}

// prefillWork is PrefillWork with the decoder layers' linear weights
// quantized to codes of bits bits and lm_head to headBits, or not (0).
func (c Config) prefillWork(batch, seq, dtSize, bits, headBits int) Work {
	L, H, V := float64(c.NumHiddenLayers), float64(c.HiddenSize), float64(c.VocabSize)
	B, S := float64(batch), float64(seq)
	// q·kᵀ and p·v over the causal triangle: S(S+1)/2 pairs per head.
	attn := 2 * 2 * float64(c.HeadDim) * float64(c.NumAttentionHeads) * S * (S + 1) / 2
	flops := L*(B*S*2*c.layerMACs()+B*attn) + B*2*H*V
	cache := 2 * L * B * S * float64(c.KVDim()) * float64(dtSize)
	return Work{FLOPs: flops, Bytes: c.linearBytes(dtSize, bits, headBits) + B*S*H*float64(dtSize) + cache}
}

// DecodeWork is one decode step of batch sequences whose caches hold ctx
// tokens: the new token attends to ctx+1 keys.
func (c Config) DecodeWork(batch, ctx, dtSize int) Work {
	return c.decodeWork(batch, ctx, dtSize, 0, 0)
}

// DecodeWork is Config.DecodeWork for the model: in its dtype, with the
// linear modules' weights as quantized once it is (int8, or 4 bits).
func (m *Model) DecodeWork(batch, ctx int) Work {
	return m.Config.decodeWork(batch, ctx, m.Precision.DType().Size(), m.weightBits, m.headBits)
}

// decodeWork is DecodeWork with the decoder layers' linear weights
// quantized to codes of bits bits and lm_head to headBits, or not (0).
func (c Config) decodeWork(batch, ctx, dtSize, bits, headBits int) Work {
	L, H, V := float64(c.NumHiddenLayers), float64(c.HiddenSize), float64(c.VocabSize)
	B, K := float64(batch), float64(ctx+1)
	attn := 2 * 2 * float64(c.HeadDim) * float64(c.NumAttentionHeads) * K
	flops := L*B*(2*c.layerMACs()+attn) + B*2*H*V
	cache := 2 * L * B * K * float64(c.KVDim()) * float64(dtSize)
	return Work{FLOPs: flops, Bytes: c.linearBytes(dtSize, bits, headBits) + B*H*float64(dtSize) + cache}
}

// LoRAStepWork is one LoRA training step over batch sequences of seq
// tokens in a dtype of dtSize bytes with the adapter's rank and targets:
// the forward pass with every position's logits; the backward pass, which
// through frozen weights needs only the inputs' gradients (as many
// multiply-adds as the forward, attention's twice); the adapter's
// branches (three products forward and backward per target); and with
// checkpointing, the layers' forward once more. Bytes count the frozen
// weights read by the forward and the backward passes.
func (c Config) LoRAStepWork(batch, seq, dtSize, rank int, targets []string, checkpoint bool) Work {
	L, H, V := float64(c.NumHiddenLayers), float64(c.HiddenSize), float64(c.VocabSize)
	N, S := float64(batch*seq), float64(seq)
	attn := float64(batch) * 2 * 2 * float64(c.HeadDim) * float64(c.NumAttentionHeads) * S * (S + 1) / 2
	layers := L * (N*2*c.layerMACs() + attn)
	head := N * 2 * H * V
	flops := 2*(layers+head) + L*attn
	for _, t := range targets {
		in, out := c.ModuleDims(t)
		flops += L * N * 6 * float64(rank*(in+out))
	}
	if checkpoint {
		flops += layers
	}
	return Work{FLOPs: flops, Bytes: 2 * c.linearBytes(dtSize, 0, 0)}
}
