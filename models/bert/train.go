package bert

import (
	"errors"
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/fp8"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/nn"
)

// DefaultAdamW is BERT pre-training's optimiser: lr 1e-4, betas (0.9,
// 0.999), eps 1e-8 (PyTorch's), weight decay 0.01 (on parameters of two
// or more dimensions, as nn.TrainState applies it).
func DefaultAdamW() nn.AdamW {
	return nn.AdamW{LR: 1e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
}

// Batch is one masked-LM training batch, row-major [batch, seq], without
// padding.
type Batch struct {
	IDs     []int32
	TypeIDs []int32 // nil means all zero
	// Labels holds the original token at each masked position and
	// kernels.IgnoreIndex (-100) everywhere else, as Hugging Face's labels.
	Labels []int32
}

// TrainOptions are a Trainer's sizes, optimiser and arithmetic.
type TrainOptions struct {
	// Batch sequences of Seq tokens a step.
	Batch, Seq int
	Opt        nn.AdamW
	// Precision is F32 (or zero) or BF16: bfloat16 mixed precision as
	// Megatron-LM's --bf16 runs it, float32 master weights that AdamW
	// updates and their bfloat16 copy that every op reads, activations
	// and gradients in bfloat16, the loss in float32.
	Precision nn.Precision
	// FP8, when set, runs the encoder's linear layers in FP8 over
	// BF16's arithmetic (Transformer Engine's Linear under
	// fp8_autocast): see fp8Trainer.
	FP8 *fp8.DelayedScaling
}

// Trainer trains BertForMaskedLM (encoder and masked-LM head, decoder
// tied to the token embeddings, no pooler, no dropout) with an explicit
// backward per layer over preallocated buffers.
type Trainer struct {
	Config     Config
	Batch, Seq int
	Opt        nn.AdamW

	be          kernels.Backend
	dt          kernels.DType // of the weights, activations and gradients
	state       *nn.TrainState
	fp8         *fp8Trainer // nil unless FP8
	w, g        weights
	bufs        *nn.TensorSet
	enc         encoderBufs     // ids and type ids [N]; each layer's input, output and what its backward reads
	posIDs      *kernels.Tensor // I32 [N]: 0…S−1 per row, for the position gradient
	q, k, v     *kernels.Tensor // [B, S, heads, hd] scratch of every layer (also the backward's dq, dk, dv)
	qf, kf, vf  *kernels.Tensor // [N, H] views of q, k, v
	ah          *kernels.Tensor // [B, heads, S, hd] scratch
	dqh, dkh    *kernels.Tensor
	dvh         *kernels.Tensor
	dx, dx2, dr *kernels.Tensor // [N, H]
	dh, dh4     *kernels.Tensor // [N, H], and a [B, S, heads, hd] view
	dffn        *kernels.Tensor // [N, I]
	head        *mlmHead        // sized by the batch's masked count
}

// mlmHead holds the masked-LM head's buffers for M masked positions.
type mlmHead struct {
	M             int
	bufs          *nn.TensorSet
	rows, targets *kernels.Tensor // I32 [M]: rows of the masked tokens, their labels
	gathered      *kernels.Tensor // [M, H]
	tu, ta, t     *kernels.Tensor // transform pre-activation, activation, LayerNorm [M, H]
	mean, rstd    *kernels.Tensor
	logits        *kernels.Tensor // [M, V]
	dlogits       *kernels.Tensor // [M, V]
	loss          *kernels.Tensor // F32 [M]
	dt, dta, dtu  *kernels.Tensor // [M, H]
	dgathered     *kernels.Tensor // [M, H]
}

// NewTrainer loads cfg's encoder and masked-LM head from src and
// allocates every buffer of a training step of o.
func NewTrainer(be kernels.Backend, cfg Config, src nn.Source, o TrainOptions) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	batch, seq := o.Batch, o.Seq
	if batch <= 0 || seq <= 0 || seq > cfg.MaxPositionEmbeddings {
		return nil, fmt.Errorf("bert: batch %d, seq %d: want both > 0 and seq ≤ max_position_embeddings %d: %w",
			batch, seq, cfg.MaxPositionEmbeddings, ErrInput)
	}
	prec := o.Precision
	if prec == 0 {
		prec = nn.F32
	}
	if prec != nn.F32 && prec != nn.BF16 {
		return nil, fmt.Errorf("bert: training in %v: want f32 or bf16: %w", prec, ErrInput)
	}
	if o.FP8 != nil && prec != nn.BF16 {
		return nil, fmt.Errorf("bert: FP8 training runs over bf16 (Precision %v): %w", prec, ErrInput)
	}
	state, err := nn.NewMixedTrainState(be, src, cfg.Params(false, true), prec.DType())
	if err != nil {
		return nil, err
	}
	t := &Trainer{
		Config: cfg, Batch: batch, Seq: seq, Opt: o.Opt, be: be, dt: prec.DType(), state: state,
		w: wire(cfg, state.Values.Get), g: wire(cfg, state.Grads.Get), bufs: nn.NewTensorSet(be),
	}
	if err := t.allocActivations(); err != nil {
		return nil, errors.Join(fmt.Errorf("bert: %w", err), t.Close())
	}
	if o.FP8 != nil {
		if t.fp8, err = newFP8Trainer(t, *o.FP8); err != nil {
			return nil, errors.Join(fmt.Errorf("bert: %w", err), t.Close())
		}
	}
	return t, nil
}

// allocActivations allocates the embeddings' and every layer's buffers,
// each layer's input the previous one's output, with what the backward
// reads kept per layer, and the backward's scratch.
func (t *Trainer) allocActivations() error {
	cfg := t.Config
	B, S, H, I, nh, hd := t.Batch, t.Seq, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumAttentionHeads, cfg.HeadDim()
	N := B * S
	a := nn.Allocator{Set: t.bufs}
	f32 := func(shape ...int) *kernels.Tensor { return a.Tensor(kernels.F32, shape...) }
	act := func(shape ...int) *kernels.Tensor { return a.Tensor(t.dt, shape...) }
	view := a.View
	pos := make([]int32, S)
	posBS := make([]int32, N)
	lens := make([]int32, B)
	for i := range posBS {
		posBS[i] = int32(i % S)
		pos[i%S] = int32(i % S)
	}
	for b := range lens {
		lens[b] = int32(S)
	}
	e := &t.enc
	e.ids, e.typeIDs = a.Ints("input_ids", nil, N), a.Ints("token_type_ids", nil, N)
	t.posIDs, e.pos = a.Ints("position ids", posBS, N), a.Ints("position ids", pos, S)
	e.keyLens = a.Ints("key lengths", lens, B)
	e.posEmb, e.sum, e.emb, e.mean, e.rstd = act(S, H), act(N, H), act(N, H), f32(N), f32(N)
	e.sum3 = view(e.sum, B, S, H)
	t.q, t.k, t.v, t.ah = act(B, S, nh, hd), act(B, S, nh, hd), act(B, S, nh, hd), act(B, nh, S, hd)
	t.qf, t.kf, t.vf = view(t.q, N, H), view(t.k, N, H), view(t.v, N, H)
	x := e.emb
	for range cfg.NumHiddenLayers {
		l := layerBufs{
			x: x, out: act(N, H),
			q: t.qf, k: t.kf, v: t.vf, q4: t.q, k4: t.k, v4: t.v, ah: t.ah,
			qh: act(B, nh, S, hd), kh: act(B, nh, S, hd), vh: act(B, nh, S, hd),
			a: act(N, H), r1: act(N, H), h1: act(N, H), mean1: f32(N), rstd1: f32(N),
			u: act(N, I), f: act(N, I), r2: act(N, H), mean2: f32(N), rstd2: f32(N),
		}
		l.a4 = view(l.a, B, S, nh, hd)
		e.layers = append(e.layers, l)
		x = l.out
	}
	t.dqh, t.dkh, t.dvh = act(B, nh, S, hd), act(B, nh, S, hd), act(B, nh, S, hd)
	t.dx, t.dx2, t.dr, t.dh = act(N, H), act(N, H), act(N, H), act(N, H)
	t.dh4 = view(t.dh, B, S, nh, hd)
	t.dffn = act(N, I)
	return a.Err()
}

// setBatch checks b and uploads it; it returns the masked rows and their
// labels.
func (t *Trainer) setBatch(b Batch) (rows, targets []int32, err error) {
	cfg := t.Config
	in := Inputs{IDs: b.IDs, TypeIDs: b.TypeIDs}
	if _, err := in.lengths(cfg, t.Batch, t.Seq); err != nil {
		return nil, nil, err
	}
	if len(b.Labels) != len(b.IDs) {
		return nil, nil, fmt.Errorf("bert: labels has %d values, want %d: %w", len(b.Labels), len(b.IDs), ErrInput)
	}
	for i, l := range b.Labels {
		if l == kernels.IgnoreIndex {
			continue
		}
		if l < 0 || int(l) >= cfg.VocabSize {
			return nil, nil, fmt.Errorf("bert: labels[%d, %d] = %d is neither -100 nor in [0, %d): %w",
				i/t.Seq, i%t.Seq, l, cfg.VocabSize, ErrInput)
		}
		rows, targets = append(rows, int32(i)), append(targets, l)
	}
	if len(rows) == 0 {
		return nil, nil, fmt.Errorf("bert: the batch has no masked tokens (every label is -100): %w", ErrInput)
	}
	types := b.TypeIDs
	if types == nil {
		types = make([]int32, len(b.IDs))
	}
	if err := kernels.UploadInt32(t.enc.ids, b.IDs); err != nil {
		return nil, nil, fmt.Errorf("bert: input_ids: %w", err)
	}
	if err := kernels.UploadInt32(t.enc.typeIDs, types); err != nil {
		return nil, nil, fmt.Errorf("bert: token_type_ids: %w", err)
	}
	return rows, targets, nil
}

// sizeHead makes the masked-LM head's buffers fit M masked tokens.
func (t *Trainer) sizeHead(rows, targets []int32) error {
	M, H, V := len(rows), t.Config.HiddenSize, t.Config.VocabSize
	if t.head == nil || t.head.M != M {
		if t.head != nil {
			if err := t.head.bufs.Free(); err != nil {
				return err
			}
			t.head = nil
		}
		h := &mlmHead{M: M, bufs: nn.NewTensorSet(t.be)}
		a := nn.Allocator{Set: h.bufs}
		f32 := func(shape ...int) *kernels.Tensor { return a.Tensor(kernels.F32, shape...) }
		act := func(shape ...int) *kernels.Tensor { return a.Tensor(t.dt, shape...) }
		h.gathered, h.tu, h.ta, h.t = act(M, H), act(M, H), act(M, H), act(M, H)
		h.mean, h.rstd, h.logits, h.dlogits, h.loss = f32(M), f32(M), act(M, V), act(M, V), f32(M)
		h.dt, h.dta, h.dtu, h.dgathered = act(M, H), act(M, H), act(M, H), act(M, H)
		h.rows, h.targets = a.Tensor(kernels.I32, M), a.Tensor(kernels.I32, M)
		if err := a.Err(); err != nil {
			return errors.Join(fmt.Errorf("bert: masked-LM head: %w", err), h.bufs.Free())
		}
		t.head = h
	}
	if err := kernels.UploadInt32(t.head.rows, rows); err != nil {
		return fmt.Errorf("bert: masked rows: %w", err)
	}
	if err := kernels.UploadInt32(t.head.targets, targets); err != nil {
		return fmt.Errorf("bert: labels: %w", err)
	}
	return nil
}

// Step runs one training step on b — forward, loss, backward, AdamW — and
// returns the loss before the update (the mean cross entropy over the
// masked tokens).
func (t *Trainer) Step(b Batch) (float32, error) {
	rows, targets, err := t.setBatch(b)
	if err != nil {
		return 0, err
	}
	if err := t.sizeHead(rows, targets); err != nil {
		return 0, err
	}
	if t.fp8 != nil {
		if err := t.fp8.begin(); err != nil {
			return 0, fmt.Errorf("bert: %w", err)
		}
	}
	if err := t.forward(); err != nil {
		return 0, err
	}
	if err := t.backward(); err != nil {
		return 0, err
	}
	if t.fp8 != nil {
		if err := t.fp8.end(); err != nil {
			return 0, fmt.Errorf("bert: %w", err)
		}
	}
	if err := t.state.Update(t.Opt); err != nil {
		return 0, fmt.Errorf("bert: %w", err)
	}
	losses, err := kernels.ToFloat32(t.head.loss)
	if err != nil {
		return 0, fmt.Errorf("bert: loss: %w", err)
	}
	var sum float64
	for _, l := range losses {
		sum += float64(l)
	}
	loss := float32(sum / float64(len(losses)))
	if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
		return loss, fmt.Errorf("bert: step %d: loss is %v", t.state.Steps(), loss)
	}
	return loss, nil
}

// StepCount is the number of updates done.
func (t *Trainer) StepCount() int { return t.state.Steps() }

// forward runs the encoder, keeping what the backward reads, and the
// masked-LM head with its loss.
func (t *Trainer) forward() error {
	be, w, cfg := t.be, &t.w, t.Config
	if err := encode(be, cfg, w, &t.enc); err != nil {
		return err
	}
	h, eps := t.head, float32(cfg.LayerNormEps)
	err := nn.RunSteps(
		func() error { return be.Embedding(h.gathered, t.enc.hidden(), h.rows) },
		func() error {
			return w.mlmDense.Project(be, nil, h.tu, layers.Input{X: h.gathered}, kernels.ActNone, nil)
		},
		func() error { return be.Act(h.ta, h.tu, cfg.Act()) },
		func() error { return be.LayerNorm(h.t, h.mean, h.rstd, h.ta, w.mlmLN.g, w.mlmLN.b, eps) },
		func() error {
			return be.MatMul(h.logits, h.t, w.word, kernels.MatMulParams{TransB: true, Bias: w.mlmBias})
		},
		func() error { return be.CrossEntropy(h.loss, h.logits, h.targets) },
	)
	if err != nil {
		return fmt.Errorf("bert: masked-LM head: %w", err)
	}
	return nil
}

func (t *Trainer) backward() error {
	be, w, g, cfg := t.be, t.w, t.g, t.Config
	act := cfg.Act()
	h := t.head
	dlogits := h.dlogits
	err := nn.RunSteps(
		func() error { return be.CrossEntropyBackward(dlogits, h.logits, h.targets, 1/float32(h.M)) },
		func() error { return be.SumRows(g.mlmBias, dlogits) },
		func() error { return be.MatMul(h.dt, dlogits, w.word, kernels.MatMulParams{}) },
		func() error {
			return be.LayerNormBackward(h.dta, g.mlmLN.g, g.mlmLN.b, h.dt, h.ta, w.mlmLN.g, h.mean, h.rstd)
		},
		func() error { return be.ActBackward(h.dtu, h.dta, h.tu, act) },
		func() error {
			return kernels.MatMulBackward(be, h.dgathered, g.mlmDense.W, g.mlmDense.B, h.dtu, h.gathered, w.mlmDense.W, false)
		},
		func() error { return be.EmbeddingBackward(t.dx, h.dgathered, h.rows) },
	)
	if err != nil {
		return fmt.Errorf("bert: masked-LM head backward: %w", err)
	}
	attn := kernels.AttentionParams{KeyLens: t.enc.keyLens}
	dy, dnext := t.dx, t.dx2
	for i := len(w.layers) - 1; i >= 0; i-- {
		l, gl, a := &w.layers[i], &g.layers[i], &t.enc.layers[i]
		x := a.x // the layer's input
		steps := []func() error{
			// FFN block: out = LN(f·W2ᵀ + b2 + h1).
			func() error {
				return be.LayerNormBackward(t.dr, gl.ln2.g, gl.ln2.b, dy, a.r2, l.ln2.g, a.mean2, a.rstd2)
			},
			func() error { return t.linearBackward(i, linOut, t.dffn, false, gl.ffnOut, t.dr, a.f) },
			func() error { return be.ActBackward(t.dffn, t.dffn, a.u, act) },
			func() error { return t.linearBackward(i, linIn, t.dh, false, gl.ffnIn, t.dffn, a.h1) },
			func() error { return be.Add(t.dh, t.dh, t.dr) },
			// Attention block: h1 = LN(a·Woᵀ + bo + x).
			func() error {
				return be.LayerNormBackward(t.dr, gl.ln1.g, gl.ln1.b, t.dh, a.r1, l.ln1.g, a.mean1, a.rstd1)
			},
			func() error { return t.linearBackward(i, linO, t.dh, false, gl.o, t.dr, a.a) },
			func() error { return be.SwapAxes(t.ah, t.dh4) },
			func() error { return be.AttentionBackward(t.dqh, t.dkh, t.dvh, t.ah, a.qh, a.kh, a.vh, attn) },
			func() error { return be.SwapAxes(t.q, t.dqh) },
			func() error { return be.SwapAxes(t.k, t.dkh) },
			func() error { return be.SwapAxes(t.v, t.dvh) },
			// dx = dq·Wq + dk·Wk + dv·Wv + dr, and the projections' gradients.
			func() error { return t.linearBackward(i, linQ, dnext, false, gl.q, t.qf, x) },
			func() error { return t.linearBackward(i, linK, dnext, true, gl.k, t.kf, x) },
			func() error { return t.linearBackward(i, linV, dnext, true, gl.v, t.vf, x) },
			func() error { return be.Add(dnext, dnext, t.dr) },
		}
		if err := nn.RunSteps(steps...); err != nil {
			return fmt.Errorf("bert: layer %d backward: %w", i, err)
		}
		dy, dnext = dnext, dy
	}
	err = nn.RunSteps(
		func() error {
			return be.LayerNormBackward(t.dr, g.embLN.g, g.embLN.b, dy, t.enc.sum, w.embLN.g, t.enc.mean, t.enc.rstd)
		},
		func() error { return be.EmbeddingBackward(g.word, t.dr, t.enc.ids) },
		// The tied decoder's part of the token-embedding gradient, added
		// in place: dlogitsᵀ·t.
		func() error {
			return be.MatMul(g.word, h.dlogits, h.t, kernels.MatMulParams{TransA: true, Beta: 1})
		},
		func() error { return be.EmbeddingBackward(g.pos, t.dr, t.posIDs) },
		func() error { return be.EmbeddingBackward(g.typ, t.dr, t.enc.typeIDs) },
	)
	if err != nil {
		return fmt.Errorf("bert: embeddings backward: %w", err)
	}
	return nil
}

// linearBackward computes the gradients of layer i's linear j, out =
// x·Wᵀ + b, from dout: dx = dout·W, added to dx when accumulate, and the
// weight's and bias's gradients g; in FP8 when the trainer's linears are.
func (t *Trainer) linearBackward(i, j int, dx *kernels.Tensor, accumulate bool, g linear, dout, x *kernels.Tensor) error {
	if f := t.fp8.of(i, j); f != nil {
		return t.fp8.backward(f, dx, accumulate, g, dout, x)
	}
	w := t.w.layers[i].linears()[j].W
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	if err := t.be.MatMul(dx, dout, w, kernels.MatMulParams{Beta: beta}); err != nil {
		return err
	}
	return kernels.MatMulBackward(t.be, nil, g.W, g.B, dout, x, w, false)
}

// Params lists the trained parameters (Hugging Face names).
func (t *Trainer) Params() []nn.Param { return t.state.Params }

// Param downloads a parameter's current values (the float32 masters in
// mixed precision).
func (t *Trainer) Param(name string) ([]float32, error) { return t.download(t.state.Masters, name) }

// Grad downloads a parameter's gradient from the last step.
func (t *Trainer) Grad(name string) ([]float32, error) { return t.download(t.state.Grads, name) }

func (t *Trainer) download(s *nn.TensorSet, name string) ([]float32, error) {
	x := s.Get(name)
	if x == nil {
		return nil, fmt.Errorf("bert: no parameter %q", name)
	}
	return kernels.ToFloat32(x)
}

// Close frees everything.
func (t *Trainer) Close() error {
	var errs []error
	if t.head != nil {
		errs = append(errs, t.head.bufs.Free())
	}
	if t.fp8 != nil {
		errs = append(errs, t.fp8.close())
	}
	return errors.Join(append(errs, t.bufs.Free(), t.state.Free())...)
}
