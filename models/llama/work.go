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

// weightCodes is how a model's linear weights are stored once quantized:
// the decoder layers' modules as codes of bits bits and lm_head as codes
// of headBits bits (0: in floating point), each with a scale per group
// values along a row, or per output channel where the group is 0, in
// float32, or in float16 where half (headHalf) is set.
type weightCodes struct {
	bits, group, headBits, headGroup int
	half, headHalf                   bool
}

// codeBytes is the size of n weights in out channels stored as codes of
// bits bits with a scale per group values (0: per channel), in float16
// if half, else float32.
func codeBytes(n, out float64, bits, group int, half bool) float64 {
	scales := out
	if group > 0 {
		scales = n / float64(group)
	}
	size := 4.0
	if half {
		size = 2
	}
	return n*float64(bits)/8 + size*scales
}

// linearBytes is the size of the weights a step reads in full: every
// layer's projections, MLP and norms, the final norm and lm_head (one row
// of the embedding table per token is counted separately), in a dtype of
// dtSize bytes, or with the projections and MLP, and lm_head, stored as q
// says.
func (c Config) linearBytes(dtSize int, q weightCodes) float64 {
	H, V, dt := float64(c.HiddenSize), float64(c.VocabSize), float64(dtSize)
	linears := dt * c.layerMACs()
	if q.bits > 0 {
		linears = codeBytes(c.layerMACs(), c.layerChannels(), q.bits, q.group, q.half)
	}
	head := dt * V * H
	if q.headBits > 0 {
		head = codeBytes(V*H, V, q.headBits, q.headGroup, q.headHalf)
	}
	perLayer := linears + dt*2*H
	return float64(c.NumHiddenLayers)*perLayer + dt*H + head
}

// PrefillWork is a prefill of batch prompts of seq tokens into an empty
// cache, with the logits of each prompt's last token, in a dtype of
// dtSize bytes.
func (c Config) PrefillWork(batch, seq, dtSize int) Work {
	return c.prefillWork(batch, seq, dtSize, weightCodes{})
}

// PrefillWork is Config.PrefillWork for the model: in its dtype, with the
// linear modules' weights as quantized once it is (int8, or 4 bits).
func (m *Model) PrefillWork(batch, seq int) Work {
	return m.Config.prefillWork(batch, seq, m.Precision.DType().Size(), m.stored)
}

// prefillWork is PrefillWork with the linear weights stored as q says.
func (c Config) prefillWork(batch, seq, dtSize int, q weightCodes) Work {
	L, H, V := float64(c.NumHiddenLayers), float64(c.HiddenSize), float64(c.VocabSize)
	B, S := float64(batch), float64(seq)
	// q·kᵀ and p·v over the causal triangle: S(S+1)/2 pairs per head.
	attn := 2 * 2 * float64(c.HeadDim) * float64(c.NumAttentionHeads) * S * (S + 1) / 2
	flops := L*(B*S*2*c.layerMACs()+B*attn) + B*2*H*V
	cache := 2 * L * B * S * float64(c.KVDim()) * float64(dtSize)
	return Work{FLOPs: flops, Bytes: c.linearBytes(dtSize, q) + B*S*H*float64(dtSize) + cache}
}

// DecodeWork is one decode step of batch sequences whose caches hold ctx
// tokens: the new token attends to ctx+1 keys.
func (c Config) DecodeWork(batch, ctx, dtSize int) Work {
	return c.decodeWork(batch, ctx, dtSize, weightCodes{})
}

// DecodeWork is Config.DecodeWork for the model: in its dtype, with the
// linear modules' weights as quantized once it is (int8, or 4 bits).
func (m *Model) DecodeWork(batch, ctx int) Work {
	return m.Config.decodeWork(batch, ctx, m.Precision.DType().Size(), m.stored)
}

// decodeWork is DecodeWork with the linear weights stored as q says.
func (c Config) decodeWork(batch, ctx, dtSize int, q weightCodes) Work {
	L, H, V := float64(c.NumHiddenLayers), float64(c.HiddenSize), float64(c.VocabSize)
	B, K := float64(batch), float64(ctx+1)
	attn := 2 * 2 * float64(c.HeadDim) * float64(c.NumAttentionHeads) * K
	flops := L*B*(2*c.layerMACs()+attn) + B*2*H*V
	cache := 2 * L * B * K * float64(c.KVDim()) * float64(dtSize)
	return Work{FLOPs: flops, Bytes: c.linearBytes(dtSize, q) + B*H*float64(dtSize) + cache}
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
	return Work{FLOPs: flops, Bytes: 2 * c.linearBytes(dtSize, weightCodes{})}
}
