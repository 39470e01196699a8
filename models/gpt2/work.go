package gpt2

// Work is the arithmetic and the least memory traffic of one forward pass,
// for throughput figures and the roofline.
type Work struct {
	FLOPs float64 // multiply-adds count 2
	Bytes float64 // every weight read once, the ids in and the logits out
}

// blockMACs is the multiply-adds of one token through one block's linear
// layers: their weights' element count.
func (c Config) blockMACs() float64 {
	H, I := float64(c.NEmbd), float64(c.Inner())
	return 3*H*H + H*H + 2*H*I
}

// ForwardWork is a forward pass over batch sequences of seq tokens with
// the logits of every position, in a dtype of dtSize bytes.
func (c Config) ForwardWork(batch, seq, dtSize int) Work {
	return c.forwardWork(batch, seq, dtSize, false)
}

// ForwardWork is Config.ForwardWork for the model: in its dtype, with the
// blocks' linear weights in int8 (and a float32 scale per output channel)
// once it is quantized.
func (m *Model) ForwardWork(batch, seq int) Work {
	return m.Config.forwardWork(batch, seq, m.Precision.DType().Size(), m.quantized)
}

// forwardWork is ForwardWork with the blocks' linear weights in int8, or
// not.
func (c Config) forwardWork(batch, seq, dtSize int, quantized bool) Work {
	L, H, V, I := float64(c.NLayer), float64(c.NEmbd), float64(c.VocabSize), float64(c.Inner())
	B, S, dt := float64(batch), float64(seq), float64(dtSize)
	// q·kᵀ and p·v over the causal triangle: S(S+1)/2 pairs per head.
	attn := 2 * 2 * H * S * (S + 1) / 2
	flops := L*(B*S*2*c.blockMACs()+B*attn) + B*S*2*H*V
	linears := dt * c.blockMACs()
	if quantized {
		linears = c.blockMACs() + 4*(3*H+H+I+H)
	}
	biasNorms := dt * (3*H + H + I + H + 4*H)
	weights := L*(linears+biasNorms) + dt*(V*H+S*H+2*H)
	return Work{FLOPs: flops, Bytes: weights + B*S*4 + B*S*V*dt}
}
