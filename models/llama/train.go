package llama

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/layers"
	"github.com/zbench/zbench/models/lora"
	"github.com/zbench/zbench/models/nn"
)

// TrainOptions configure LoRA fine-tuning.
type TrainOptions struct {
	// Batch and Seq are the shape of a micro-batch: Batch sequences of
	// Seq tokens.
	Batch, Seq int
	// LoRA are the adapter's hyper-parameters.
	LoRA lora.Config
	// Adapter holds the adapter's initial values; nil means PEFT's
	// initialisation (lora.Init) under Seed.
	Adapter nn.Source
	// Seed seeds the adapter's initialisation and the dropout masks.
	Seed uint64
	// AdamW is the optimiser, LR its peak rate; Schedule shapes the rate
	// over the updates.
	AdamW    nn.AdamW
	Schedule nn.Schedule
	// MaxGradNorm bounds the global norm of the adapter's gradients
	// (clip_grad_norm_); 0 does not clip.
	MaxGradNorm float64
	// Checkpoint keeps only each layer's input through the forward pass
	// and recomputes the layer before its backward pass (activation
	// checkpointing per layer): less memory for one more forward.
	Checkpoint bool
}

// TrainBatch is one micro-batch, row-major [batch, seq]: token ids, and
// Hugging Face's causal-LM labels (unshifted: the label at position s is
// the token that position s−1 predicts; kernels.IgnoreIndex, −100, where
// nothing is learned, as on the prompt and on padding).
type TrainBatch struct {
	IDs, Labels []int32
}

// StepResult is the outcome of one update.
type StepResult struct {
	Loss     float64 // mean cross entropy over every learned token of the update's micro-batches
	GradNorm float64 // the adapter gradients' global norm before clipping
	LR       float64 // the learning rate of the update
	Tokens   int     // learned tokens (labels other than −100)
}

// trainLayer is one decoder layer's training buffers: layerBufs, with the
// heads split for attention.
type trainLayer struct {
	layerBufs
	qT, kT, vT *kernels.Tensor // [B, heads, S, D]: the attention's inputs
	attT4      *kernels.Tensor // attT as [B, S, Hq, D]
}

// adapted is one LoRA target's tensors.
type adapted struct {
	t          lora.Target
	a, b       *kernels.Tensor // A [r, in] and B [out, r] in the base's dtype (the master copies when it is F32)
	va, vb     *kernels.Tensor // the F32 master values
	ga, gb     *kernels.Tensor // their F32 gradients
	mid        *kernels.Tensor // [N, r]: dropout(in)·Aᵀ of the last forward, which B's gradient reads
	moduleSlot int
}

// Trainer fine-tunes a Model with a LoRA adapter (PEFT's LoRA): the
// model's weights stay frozen in its precision; the adapter, its
// gradients and AdamW's moments are F32 on the device, with copies in the
// model's dtype for the matmuls when it is F16 or BF16 (as under
// torch.autocast). Each layer has an explicit backward pass over
// preallocated buffers; the forward pass is the model's own
// (layerForward), with the adapter added to the targeted projections.
type Trainer struct {
	m       *Model
	opt     TrainOptions
	tb      kernels.DecoderBackward
	state   *nn.TrainState
	targets []*adapted // by layer·len(lora.Modules) + module index; nil where not adapted
	scale   float32
	dt      kernels.DType
	n       int // tokens of a micro-batch: Batch·Seq

	bufs          *nn.TensorSet
	ids, pos, tgt *kernels.Tensor // I32 [N], [B, S], [N]
	negInvFreq    *kernels.Tensor // −inv_freq: RoPE's backward rotates by −θ
	xs            []*kernels.Tensor
	layers        []*trainLayer   // one per layer, or one shared by all with Checkpoint
	att           *kernels.Tensor // [B, Hq, S, D]: the attention's output before merging heads; its gradient in the backward
	hF, logits    *kernels.Tensor
	dlogits, loss *kernels.Tensor

	dx, dh, dn     *kernels.Tensor // [N, H]
	dact, dup      *kernels.Tensor // [N, I]
	dattT, dattT4  *kernels.Tensor // [N, Hq·D] and its [B, S, Hq, D] view
	dqT, dkT, dvT  *kernels.Tensor
	dmid           *kernels.Tensor            // [N, r]
	drop           map[int]*kernels.Tensor    // [N, in] dropout scratch by width
	gradLo, grad32 map[[2]int]*kernels.Tensor // a gradient in the base dtype, and as F32, by shape

	updates, micro int
}

// NewTrainer prepares LoRA training of m with o: it loads the adapter
// and allocates every buffer of a micro-batch.
func NewTrainer(m *Model, o TrainOptions) (*Trainer, error) {
	c := m.Config
	if o.Batch <= 0 || o.Seq < 2 || o.Seq > c.MaxPositionEmbeddings {
		return nil, fmt.Errorf("llama: training batch %d × seq %d: want batch > 0 and 2 ≤ seq ≤ max_position_embeddings %d: %w",
			o.Batch, o.Seq, c.MaxPositionEmbeddings, ErrInput)
	}
	if m.Quantized() {
		return nil, fmt.Errorf("llama: LoRA training needs the float weights, and Quantize released them: %w", kernels.ErrUnsupported)
	}
	if err := o.LoRA.Validate(); err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	if err := o.Schedule.Validate(); err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	tb, err := kernels.Group[kernels.DecoderBackward](m.be)
	if err != nil {
		return nil, fmt.Errorf("llama: the decoder's backward ops (RMSNorm, SwiGLU, dropout): %w", err)
	}
	targets := o.LoRA.TargetsOf(c.NumHiddenLayers, c.ModuleDims)
	src := o.Adapter
	if src == nil {
		src = lora.Init(o.Seed)
	}
	state, err := nn.NewTrainState(m.be, src, o.LoRA.Params(targets))
	if err != nil {
		return nil, fmt.Errorf("llama: LoRA adapter: %w", err)
	}
	t := &Trainer{
		m: m, opt: o, tb: tb, state: state, scale: float32(o.LoRA.Scale()), dt: m.Precision.DType(), n: o.Batch * o.Seq,
		targets: make([]*adapted, c.NumHiddenLayers*len(lora.Modules)), bufs: nn.NewTensorSet(m.be),
		drop: map[int]*kernels.Tensor{}, gradLo: map[[2]int]*kernels.Tensor{}, grad32: map[[2]int]*kernels.Tensor{},
	}
	if err := t.alloc(targets); err != nil {
		return nil, errors.Join(fmt.Errorf("llama: training buffers: %w", err), t.Close())
	}
	return t, nil
}

// ModuleDims returns the input and output widths of a decoder layer's
// linear module (q_proj … down_proj; 0, 0 for another name).
func (c Config) ModuleDims(module string) (in, out int) {
	H, I := c.HiddenSize, c.IntermediateSize
	switch module {
	case "q_proj":
		return H, c.QDim()
	case "k_proj", "v_proj":
		return H, c.KVDim()
	case "o_proj":
		return c.QDim(), H
	case "gate_proj", "up_proj":
		return H, I
	case "down_proj":
		return I, H
	}
	return 0, 0
}

// alloc allocates the adapter's copies and every activation buffer.
func (t *Trainer) alloc(targets []lora.Target) error {
	c, B, S, N, dt := t.m.Config, t.opt.Batch, t.opt.Seq, t.n, t.dt
	a := nn.Allocator{Set: t.bufs}
	f := func(shape ...int) *kernels.Tensor { return a.Tensor(dt, shape...) }
	r := t.opt.LoRA.R
	for _, tg := range targets {
		slot := slices.Index(lora.Modules, tg.Module)
		ad := &adapted{t: tg, moduleSlot: slot,
			va: t.state.Values.Get(tg.AName()), vb: t.state.Values.Get(tg.BName()),
			ga: t.state.Grads.Get(tg.AName()), gb: t.state.Grads.Get(tg.BName()),
			mid: f(N, r)}
		ad.a, ad.b = ad.va, ad.vb
		if dt != kernels.F32 {
			ad.a, ad.b = f(r, tg.In), f(tg.Out, r)
		}
		t.targets[tg.Layer*len(lora.Modules)+slot] = ad
		if t.opt.LoRA.Dropout > 0 && t.drop[tg.In] == nil {
			t.drop[tg.In] = f(N, tg.In)
		}
		if dt != kernels.F32 {
			for _, sh := range [][2]int{{r, tg.In}, {tg.Out, r}} {
				if t.gradLo[sh] == nil {
					t.gradLo[sh], t.grad32[sh] = f(sh[0], sh[1]), a.Tensor(kernels.F32, sh[0], sh[1])
				}
			}
		}
	}
	pos := make([]int32, N)
	for i := range pos {
		pos[i] = int32(i % S)
	}
	inv := c.InvFreq()
	for i := range inv {
		inv[i] = -inv[i]
	}
	t.ids, t.tgt, t.pos = a.Ints("input_ids", nil, N), a.Ints("targets", nil, N), a.Ints("position_ids", pos, B, S)
	var err error
	if t.negInvFreq, err = t.bufs.Upload("-inv_freq", kernels.F32, inv, len(inv)); err != nil {
		return err
	}
	H, I, Hq, Hkv, D := c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	for range c.NumHiddenLayers + 1 {
		t.xs = append(t.xs, f(N, H))
	}
	q, k, v := f(B, S, Hq, D), f(B, S, Hkv, D), f(B, S, Hkv, D)
	shared := c.NumHiddenLayers
	if t.opt.Checkpoint {
		shared = 1
	}
	for range shared {
		l := &trainLayer{layerBufs: layerBufs{
			h1: f(N, H), x2: f(N, H), h2: f(N, H), q: q, k: k, v: v,
			q2: a.View(q, N, Hq*D), k2: a.View(k, N, Hkv*D), v2: a.View(v, N, Hkv*D),
			attT: f(N, Hq*D), gate: f(N, I), up: f(N, I), act: f(N, I),
		}, qT: f(B, Hq, S, D), kT: f(B, Hkv, S, D), vT: f(B, Hkv, S, D)}
		t.layers = append(t.layers, l)
	}
	t.att = f(B, Hq, S, D)
	t.hF, t.logits, t.dlogits = f(N, H), f(N, c.VocabSize), f(N, c.VocabSize)
	t.loss = a.Tensor(kernels.F32, N)
	t.dx, t.dh, t.dn = f(N, H), f(N, H), f(N, H)
	t.dact, t.dup = f(N, I), f(N, I)
	t.dattT = f(N, Hq*D)
	t.dattT4 = a.View(t.dattT, B, S, Hq, D)
	t.dqT, t.dkT, t.dvT = f(B, Hq, S, D), f(B, Hkv, S, D), f(B, Hkv, S, D)
	t.dmid = f(N, r)
	if err := a.Err(); err != nil {
		return err
	}
	for _, l := range t.layers {
		if l.attT4, err = l.attT.Reshape(B, S, Hq, D); err != nil {
			return err
		}
	}
	return t.refresh()
}

// layer returns layer i's buffers, its input and output wired in.
func (t *Trainer) layer(i int) *trainLayer {
	l := t.layers[min(i, len(t.layers)-1)]
	l.x, l.out = t.xs[i], t.xs[i+1]
	return l
}

// refresh copies the master adapter into the base dtype's copies.
func (t *Trainer) refresh() error {
	if t.dt == kernels.F32 {
		return nil
	}
	for _, ad := range t.targets {
		if ad == nil {
			continue
		}
		if err := t.m.be.Cast(ad.a, ad.va); err != nil {
			return fmt.Errorf("llama: %s: %w", ad.t.AName(), err)
		}
		if err := t.m.be.Cast(ad.b, ad.vb); err != nil {
			return fmt.Errorf("llama: %s: %w", ad.t.BName(), err)
		}
	}
	return nil
}

// target returns the adapter of layer i's module, nil when not adapted.
func (t *Trainer) target(i int, module string) *adapted {
	return t.targets[i*len(lora.Modules)+slices.Index(lora.Modules, module)]
}

// dropSeed is the dropout stream of one adapted module in one
// micro-batch: the forward pass and its recomputation draw the same mask.
func (t *Trainer) dropSeed(ad *adapted) uint64 {
	z := t.opt.Seed ^ 0x6c6f7261 // "lora"
	for _, v := range []int{t.updates, t.micro, ad.t.Layer, ad.moduleSlot} {
		z = splitmix(z + uint64(v))
	}
	return z
}

// splitmix is splitmix64's finaliser of z + its increment.
func splitmix(z uint64) uint64 {
	z += 0x9E3779B97F4A7C15
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// dropout returns dropout(in) for the adapter's branch: in itself without
// dropout, else the scratch of in's width, filled.
func (t *Trainer) dropout(ad *adapted, in *kernels.Tensor) (*kernels.Tensor, error) {
	p := t.opt.LoRA.Dropout
	if p == 0 {
		return in, nil
	}
	d := t.drop[ad.t.In]
	return d, t.tb.Dropout(d, in, float32(p), t.dropSeed(ad))
}

// project is the training projector: the frozen weight, plus
// scale·dropout(in)·Aᵀ·Bᵀ where the module is adapted.
func (t *Trainer) project(i int, module string, out, in *kernels.Tensor, w *linear, residual, _ bool) error {
	be := t.m.be
	var res *kernels.Tensor
	if residual {
		res = out
	}
	if err := w.Project(be, nil, out, layers.Input{X: in}, kernels.ActNone, res); err != nil {
		return err
	}
	ad := t.target(i, module)
	if ad == nil {
		return nil
	}
	u, err := t.dropout(ad, in)
	if err != nil {
		return fmt.Errorf("lora dropout: %w", err)
	}
	if err := be.MatMul(ad.mid, u, ad.a, kernels.MatMulParams{TransB: true}); err != nil {
		return fmt.Errorf("lora_A: %w", err)
	}
	if err := be.MatMul(out, ad.mid, ad.b, kernels.MatMulParams{TransB: true, Alpha: t.scale, Beta: 1}); err != nil {
		return fmt.Errorf("lora_B: %w", err)
	}
	return nil
}

// projectBackward is project's backward pass for dy, the gradient of its
// output: din = dy·W plus the adapter's part (added to din when
// accumulate), and the adapter's gradients.
func (t *Trainer) projectBackward(i int, module string, din, dy, in, w *kernels.Tensor, accumulate bool) error {
	be := t.m.be
	p := kernels.MatMulParams{}
	if accumulate {
		p.Beta = 1
	}
	if err := be.MatMul(din, dy, w, p); err != nil {
		return err
	}
	ad := t.target(i, module)
	if ad == nil {
		return nil
	}
	// B's gradient: scale·dyᵀ·mid; the branch's: dmid = scale·dy·B.
	if err := t.grad(ad.gb, dy, ad.mid, kernels.MatMulParams{TransA: true, Alpha: t.scale}); err != nil {
		return fmt.Errorf("lora_B gradient: %w", err)
	}
	if err := be.MatMul(t.dmid, dy, ad.b, kernels.MatMulParams{Alpha: t.scale}); err != nil {
		return fmt.Errorf("lora_B backward: %w", err)
	}
	u, err := t.dropout(ad, in) // the forward's mask again
	if err != nil {
		return fmt.Errorf("lora dropout: %w", err)
	}
	if err := t.grad(ad.ga, t.dmid, u, kernels.MatMulParams{TransA: true}); err != nil {
		return fmt.Errorf("lora_A gradient: %w", err)
	}
	if t.opt.LoRA.Dropout == 0 {
		if err := be.MatMul(din, t.dmid, ad.a, kernels.MatMulParams{Beta: 1}); err != nil {
			return fmt.Errorf("lora_A backward: %w", err)
		}
		return nil
	}
	du := u // the dropout scratch, free again
	err = nn.RunSteps(
		func() error { return be.MatMul(du, t.dmid, ad.a, kernels.MatMulParams{}) },
		func() error { return t.tb.Dropout(du, du, float32(t.opt.LoRA.Dropout), t.dropSeed(ad)) },
		func() error { return be.Add(din, din, du) },
	)
	if err != nil {
		return fmt.Errorf("lora_A backward: %w", err)
	}
	return nil
}

// grad sets (first micro-batch) or adds to (later ones) the F32 gradient
// g the product of a and b, computed in the base dtype.
func (t *Trainer) grad(g, a, b *kernels.Tensor, p kernels.MatMulParams) error {
	be := t.m.be
	if t.dt == kernels.F32 {
		if t.micro > 0 {
			p.Beta = 1
		}
		return be.MatMul(g, a, b, p)
	}
	sh := [2]int{g.Shape()[0], g.Shape()[1]}
	lo, f32 := t.gradLo[sh], t.grad32[sh]
	if err := be.MatMul(lo, a, b, p); err != nil {
		return err
	}
	if t.micro == 0 {
		return be.Cast(g, lo)
	}
	if err := be.Cast(f32, lo); err != nil {
		return err
	}
	return be.Add(g, g, f32)
}

// attend is training's attention: causal over the step's own keys. Right
// padding needs no mask: a real token's keys are all real, and a padded
// position's output reaches no learned token.
func (t *Trainer) attend(l *trainLayer) func() error {
	be := t.m.be
	return func() error {
		return nn.RunSteps(
			func() error { return be.SwapAxes(l.qT, l.q) },
			func() error { return be.SwapAxes(l.kT, l.k) },
			func() error { return be.SwapAxes(l.vT, l.v) },
			func() error { return be.Attention(t.att, l.qT, l.kT, l.vT, kernels.AttentionParams{Causal: true}) },
			func() error { return be.SwapAxes(l.attT4, t.att) },
		)
	}
}

// setBatch checks and uploads a micro-batch, its labels shifted.
func (t *Trainer) setBatch(b TrainBatch) error {
	B, S, V := t.opt.Batch, t.opt.Seq, t.m.Config.VocabSize
	if len(b.IDs) != t.n || len(b.Labels) != t.n {
		return fmt.Errorf("llama: a micro-batch of %d ids and %d labels, want %d × %d: %w", len(b.IDs), len(b.Labels), B, S, ErrInput)
	}
	tgt := make([]int32, t.n)
	for i, id := range b.IDs {
		if id < 0 || int(id) >= V {
			return fmt.Errorf("llama: input id %d at [%d, %d] is outside the vocabulary [0, %d): %w", id, i/S, i%S, V, ErrInput)
		}
		l := b.Labels[i]
		if l != kernels.IgnoreIndex && (l < 0 || int(l) >= V) {
			return fmt.Errorf("llama: label %d at [%d, %d] is neither -100 nor in [0, %d): %w", l, i/S, i%S, V, ErrInput)
		}
		// Position s predicts the label of position s+1 (HF's shift).
		tgt[i] = kernels.IgnoreIndex
		if i%S < S-1 {
			tgt[i] = b.Labels[i+1]
		}
	}
	if err := kernels.UploadInt32(t.ids, b.IDs); err != nil {
		return fmt.Errorf("llama: input ids: %w", err)
	}
	if err := kernels.UploadInt32(t.tgt, tgt); err != nil {
		return fmt.Errorf("llama: labels: %w", err)
	}
	return nil
}

// Step makes one update from the micro-batches (gradient accumulation
// over all of them): forward, loss, backward for each, then clipping and
// AdamW at the schedule's rate. The loss is the mean over every learned
// token of the micro-batches, as transformers' Trainer computes it.
func (t *Trainer) Step(micro ...TrainBatch) (StepResult, error) {
	if len(micro) == 0 {
		return StepResult{}, fmt.Errorf("llama: a training step needs at least one micro-batch: %w", ErrInput)
	}
	var res StepResult
	for _, b := range micro {
		for j, l := range b.Labels {
			if l != kernels.IgnoreIndex && j%t.opt.Seq > 0 { // a learned label after the shift
				res.Tokens++
			}
		}
	}
	if res.Tokens == 0 {
		return res, fmt.Errorf("llama: the step's micro-batches have no label to learn (every label is -100 after the shift): %w", ErrInput)
	}
	var sum float64
	for i, b := range micro {
		t.micro = i
		if err := t.setBatch(b); err != nil {
			return res, err
		}
		if err := t.forward(); err != nil {
			return res, err
		}
		if err := t.backward(float32(1 / float64(res.Tokens))); err != nil {
			return res, err
		}
		loss, err := kernels.ToFloat32(t.loss)
		if err != nil {
			return res, fmt.Errorf("llama: loss: %w", err)
		}
		for _, l := range loss {
			sum += float64(l)
		}
	}
	res.Loss = sum / float64(res.Tokens)
	if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
		return res, fmt.Errorf("llama: update %d: the loss is %v", t.updates+1, res.Loss)
	}
	var err error
	if res.GradNorm, err = t.state.ClipGradNorm(t.opt.MaxGradNorm); err != nil {
		return res, fmt.Errorf("llama: %w", err)
	}
	opt := t.opt.AdamW
	res.LR = float64(opt.LR) * t.opt.Schedule.Factor(t.updates)
	opt.LR = float32(res.LR)
	if err := t.state.Update(opt); err != nil {
		return res, fmt.Errorf("llama: %w", err)
	}
	t.updates++
	return res, t.refresh()
}

// Updates is the number of updates made.
func (t *Trainer) Updates() int { return t.updates }

// forward runs the embeddings, every layer (keeping what the backward
// reads, or only the layers' inputs with Checkpoint), the final norm, the
// logits and the loss of every position.
func (t *Trainer) forward() error {
	m, be := t.m, t.m.be
	if err := be.Embedding(t.xs[0], m.w.embed, t.ids); err != nil {
		return fmt.Errorf("llama: embed_tokens: %w", err)
	}
	for i := range m.w.layers {
		l := t.layer(i)
		if err := m.layerForward(i, &l.layerBufs, t.pos, projector{one: t.project}, t.attend(l)); err != nil {
			return err
		}
	}
	err := nn.RunSteps(
		func() error { return be.RMSNorm(t.hF, t.xs[len(t.xs)-1], m.w.norm, float32(m.Config.RMSNormEps)) },
		func() error { return be.MatMul(t.logits, t.hF, m.w.head.W, kernels.MatMulParams{TransB: true}) },
		func() error { return be.CrossEntropy(t.loss, t.logits, t.tgt) },
	)
	if err != nil {
		return fmt.Errorf("llama: lm_head and loss: %w", err)
	}
	return nil
}

// backward runs the loss's gradient (scale per learned token) back
// through the head and every layer into the adapter's gradients.
func (t *Trainer) backward(scale float32) error {
	m, be := t.m, t.m.be
	eps := float32(m.Config.RMSNormEps)
	err := nn.RunSteps(
		func() error { return be.CrossEntropyBackward(t.dlogits, t.logits, t.tgt, scale) },
		func() error { return be.MatMul(t.dh, t.dlogits, m.w.head.W, kernels.MatMulParams{}) },
		func() error { return t.tb.RMSNormBackward(t.dx, nil, t.dh, t.xs[len(t.xs)-1], m.w.norm, eps) },
	)
	if err != nil {
		return fmt.Errorf("llama: lm_head and norm backward: %w", err)
	}
	for i := len(m.w.layers) - 1; i >= 0; i-- {
		l := t.layer(i)
		if t.opt.Checkpoint {
			if err := m.layerForward(i, &l.layerBufs, t.pos, projector{one: t.project}, t.attend(l)); err != nil {
				return fmt.Errorf("%w (recomputed)", err)
			}
		}
		if err := t.layerBackward(i, l); err != nil {
			return fmt.Errorf("llama: layer %d backward: %w", i, err)
		}
	}
	return nil
}

// layerBackward turns t.dx, the gradient of layer i's output, into the
// gradient of its input, in place, adding to the adapter's gradients.
func (t *Trainer) layerBackward(i int, l *trainLayer) error {
	m, be, tb := t.m, t.m.be, t.tb
	w := &m.w.layers[i]
	eps := float32(m.Config.RMSNormEps)
	causal := kernels.AttentionParams{Causal: true}
	dq, dk, dv := l.q, l.k, l.v // the forward's scratch, free now
	dq2, dk2, dv2 := l.q2, l.k2, l.v2
	steps := []struct {
		name string
		run  func() error
	}{
		// out = x2 + act·Wdᵀ: x2's gradient is dx as it is.
		{"down_proj", func() error { return t.projectBackward(i, "down_proj", t.dact, t.dx, l.act, w.down.W, false) }},
		{"silu·up", func() error { return tb.SwiGLUBackward(t.dact, t.dup, t.dact, l.gate, l.up) }},
		{"gate_proj", func() error { return t.projectBackward(i, "gate_proj", t.dh, t.dact, l.h2, w.gate.W, false) }},
		{"up_proj", func() error { return t.projectBackward(i, "up_proj", t.dh, t.dup, l.h2, w.up.W, true) }},
		{"post_attention_layernorm", func() error { return tb.RMSNormBackward(t.dn, nil, t.dh, l.x2, w.mlpNorm, eps) }},
		{"residual", func() error { return be.Add(t.dx, t.dx, t.dn) }},
		// x2 = x + attT·Woᵀ: x's gradient starts as dx.
		{"o_proj", func() error { return t.projectBackward(i, "o_proj", t.dattT, t.dx, l.attT, w.o.W, false) }},
		{"split heads", func() error { return be.SwapAxes(t.att, t.dattT4) }},
		{"attention", func() error { return be.AttentionBackward(t.dqT, t.dkT, t.dvT, t.att, l.qT, l.kT, l.vT, causal) }},
		{"merge heads", func() error {
			return nn.RunSteps(
				func() error { return be.SwapAxes(dq, t.dqT) },
				func() error { return be.SwapAxes(dk, t.dkT) },
				func() error { return be.SwapAxes(dv, t.dvT) },
			)
		}},
		{"rope", func() error {
			return nn.RunSteps(
				func() error { return m.dec.RoPE(dq, t.pos, t.negInvFreq) },
				func() error { return m.dec.RoPE(dk, t.pos, t.negInvFreq) },
			)
		}},
		{"q_proj", func() error { return t.projectBackward(i, "q_proj", t.dh, dq2, l.h1, w.q.W, false) }},
		{"k_proj", func() error { return t.projectBackward(i, "k_proj", t.dh, dk2, l.h1, w.k.W, true) }},
		{"v_proj", func() error { return t.projectBackward(i, "v_proj", t.dh, dv2, l.h1, w.v.W, true) }},
		{"input_layernorm", func() error { return tb.RMSNormBackward(t.dn, nil, t.dh, l.x, w.attnNorm, eps) }},
		{"residual", func() error { return be.Add(t.dx, t.dx, t.dn) }},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// Adapter downloads the adapter's current values.
func (t *Trainer) Adapter() (*lora.Adapter, error) {
	ad := &lora.Adapter{Config: t.opt.LoRA, Tensors: map[string][]float32{}}
	for _, a := range t.targets {
		if a == nil {
			continue
		}
		ad.Targets = append(ad.Targets, a.t)
		for name, x := range map[string]*kernels.Tensor{a.t.AName(): a.va, a.t.BName(): a.vb} {
			v, err := kernels.ToFloat32(x)
			if err != nil {
				return nil, fmt.Errorf("llama: %s: %w", name, err)
			}
			ad.Tensors[name] = v
		}
	}
	return ad, nil
}

// Grad downloads the gradient of an adapter tensor (PEFT's name) from the
// last step, as clipped.
func (t *Trainer) Grad(name string) ([]float32, error) {
	g := t.state.Grads.Get(name)
	if g == nil {
		return nil, fmt.Errorf("llama: the adapter has no tensor %q", name)
	}
	return kernels.ToFloat32(g)
}

// Close frees the adapter and the buffers (not the model).
func (t *Trainer) Close() error {
	return errors.Join(t.bufs.Free(), t.state.Free())
}
