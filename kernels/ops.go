package kernels

import "math"

// Activation is an elementwise function fused into an op's epilogue.
type Activation uint8

// Activations.
const (
	ActNone     Activation = iota
	ActReLU                // max(x, 0)
	ActGELU                // x·Φ(x), exact with erf (HF "gelu")
	ActGELUTanh            // tanh approximation (HF "gelu_new", "gelu_pytorch_tanh")
	ActSiLU                // x·σ(x)
	ActTanh                // tanh(x) (BERT's pooler)
)

// String names the activation.
func (a Activation) String() string {
	switch a {
	case ActNone:
		return "none"
	case ActReLU:
		return "relu"
	case ActGELU:
		return "gelu"
	case ActGELUTanh:
		return "gelu_tanh"
	case ActSiLU:
		return "silu"
	case ActTanh:
		return "tanh"
	}
	return "activation(?)"
}

// LinearPacker is an optional op group of backends whose MatMul multiplies
// a linear layer's weight in a layout of their own: the weights of a
// model that serves inference are packed into it once, when the model
// loads, instead of on every product. Callers get it with Group; a
// backend without it packs on every call.
type LinearPacker interface {
	// PackLinear keeps w [N, K] (torch.nn.Linear's layout) also in the
	// layout that MatMul multiplies as b with TransB, so that MatMul reads
	// the packed form instead of packing w again. w's values stay as they
	// are, and every MatMul computes what it computes with w unpacked.
	// They must not change afterwards except through Upload, which drops
	// the packed form; Free releases both.
	PackLinear(w *Tensor) error
}

// MatMulParams qualifies MatMul:
//
//	out = act(alpha·op(a)·op(b) + beta·out + bias)
//
// where op transposes the last two dimensions when asked.
type MatMulParams struct {
	TransA, TransB bool
	Alpha          float32    // 0 means 1
	Beta           float32    // scale of the previous out; 0 overwrites it
	Bias           *Tensor    // optional, shape [N], added to every row
	Act            Activation // optional epilogue
	// TF32 lets an F32 product run on TF32 tensor cores (10-bit mantissa
	// inputs, float32 accumulation), as torch.backends.cuda.matmul.allow_tf32
	// does. Backends without them compute in full F32.
	TF32 bool
}

// AttentionParams qualifies scaled-dot-product attention and its softmax.
type AttentionParams struct {
	// Scale multiplies q·kᵀ; 0 means 1/sqrt(head dim).
	Scale float32
	// Causal masks key j for query i when j > i + (Sk − Sq): aligned to the
	// bottom right, so that with a KV cache the last query sees every key.
	// For Sq == Sk this is the usual lower-triangular mask.
	Causal bool
	// KeyLens, optional, is an I32 tensor of shape [batch]: keys at
	// positions ≥ KeyLens[b] are padding and masked (HF's attention_mask as
	// lengths). A query row whose keys are all masked gives zeros.
	KeyLens *Tensor
}

// AdamWParams are the hyper-parameters of one AdamW update, with
// PyTorch's torch.optim.AdamW semantics (decoupled weight decay,
// bias-corrected moments).
type AdamWParams struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Step                               int // 1-based number of this update, for the bias corrections
}

// BiasCorrections returns 1 − Beta1^Step and 1 − Beta2^Step in float64: the
// divisors of the moments, computed on the host so that kernels need no pow.
func (p AdamWParams) BiasCorrections() (bc1, bc2 float64) {
	return 1 - math.Pow(float64(p.Beta1), float64(p.Step)), 1 - math.Pow(float64(p.Beta2), float64(p.Step))
}

// IgnoreIndex is the target value that CrossEntropy skips (PyTorch's
// default ignore_index).
const IgnoreIndex = -100

// Ops are the operations every backend implements. Outputs come first and
// are written in full; inputs are never modified, except for the state
// tensors of AdamW, which it updates in place. Unless stated otherwise,
// all float tensors of one call share a dtype (F32, F16 or BF16) and ops over
// "rows" work on the innermost dimension.
//
// Aliasing: the elementwise ops may write over an input of the output's
// shape and dtype: Add's out may be a or b, the out of Scale, Act and Cast
// may be x, and ActBackward's dx may be dy or x ("be" meaning the same
// tensor or a Reshape view of it). No other output may overlap an input
// or another output: SwapAxes reports out over x as an error wrapping
// ErrValue; other overlaps are not detected and leave the results
// undefined. The op groups state their own rules (Vision, QuantConv,
// Decoder, DecoderBackward).
type Ops interface {
	// MatMul multiplies a [batch…, M, K] by b [batch…, K, N] into out
	// [batch…, M, N] (with transposes, a is [batch…, K, M] and b
	// [batch…, N, K]). b may be 2-D and is then shared by every batch.
	MatMul(out, a, b *Tensor, p MatMulParams) error
	// MatMulShared multiplies one input by several linear layers' weights:
	// outs[i] = a·bs[i]ᵀ for every i, each as MatMul with TransB alone
	// would (no bias, activation or accumulation), a [rows…, K], bs[i]
	// [N_i, K] and outs[i] [rows…, N_i], all of a's dtype. A layer's query,
	// key and value projections, or its gate and up ones, are then one
	// launch where a backend can.
	MatMulShared(outs []*Tensor, a *Tensor, bs []*Tensor) error
	// Add sets out = a + b; b has a's shape or a suffix of it (broadcast).
	Add(out, a, b *Tensor) error
	// Scale sets out = s·x.
	Scale(out, x *Tensor, s float32) error
	// Fill sets every element of out to v.
	Fill(out *Tensor, v float32) error
	// Cast converts x into out, which has x's shape and any dtype.
	Cast(out, x *Tensor) error
	// Act applies an activation elementwise.
	Act(out, x *Tensor, a Activation) error
	// ActBackward sets dx = dy · act'(x).
	ActBackward(dx, dy, x *Tensor, a Activation) error
	// SumRows sets out[n] = Σ over all leading positions of x[…, n]: the
	// gradient of a broadcast bias.
	SumRows(out, x *Tensor) error
	// SwapAxes sets out[a, c, b, d] = x[a, b, c, d] for x [A, B, C, D]
	// (exactly 4-D) and out [A, C, B, D]: it splits attention heads,
	// [batch, seq, heads, hdim] → [batch, heads, seq, hdim], and merges
	// them back. x is F32, F16, BF16 or I32 and out has its dtype. out must
	// not overlap x: the same tensor, or a Reshape view of it, is an error
	// wrapping ErrValue; other overlaps are not detected.
	SwapAxes(out, x *Tensor) error

	// LayerNorm normalises rows of x [rows…, D] to out with gamma, beta [D]
	// (beta may be nil). If mean and rstd ([rows] F32) are not nil they
	// receive the statistics that LayerNormBackward needs.
	LayerNorm(out, mean, rstd, x, gamma, beta *Tensor, eps float32) error
	// LayerNormBackward computes dx and, when not nil, dgamma and dbeta
	// (overwritten, not accumulated).
	LayerNormBackward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd *Tensor) error
	// RMSNorm sets out = x / sqrt(mean(x²) + eps) · gamma per row.
	RMSNorm(out, x, gamma *Tensor, eps float32) error

	// Softmax normalises rows of x. With p.Causal or p.KeyLens, x is
	// [B, …, Sq, Sk] and the masks of AttentionParams apply (p.Scale
	// multiplies x first; 0 means 1 here).
	Softmax(out, x *Tensor, p AttentionParams) error
	// SoftmaxBackward sets dx = y ⊙ (dy − Σ dy⊙y) per row, y the forward
	// output.
	SoftmaxBackward(dx, dy, y *Tensor) error
	// Attention computes softmax(scale·q·kᵀ + mask)·v for q [B, Hq, Sq, D]
	// and k, v [B, Hkv, Sk, D] into out [B, Hq, Sq, D]; Hq must be a
	// multiple of Hkv (grouped KV heads: query head h reads KV head
	// h/(Hq/Hkv)).
	Attention(out, q, k, v *Tensor, p AttentionParams) error
	// AttentionPacked is Attention over the tokens of a fused query, key
	// and value projection, with no heads split or merged around it: qkv
	// [B, S, Hq+2·Hkv, D] holds each token's Hq query heads, then its Hkv
	// key heads, then its Hkv value heads (the product of x [B·S, W] with
	// the three weights stacked), and out [B, S, Hq, D] gets each token's
	// heads side by side, ready for the output projection. Sq = Sk = S,
	// and Hkv is read from the shapes: Hq from out's, Hq+2·Hkv from qkv's.
	AttentionPacked(out, qkv *Tensor, p AttentionParams) error
	// AttentionBackward computes dq, dk, dv from dout and the forward
	// inputs.
	AttentionBackward(dq, dk, dv, dout, q, k, v *Tensor, p AttentionParams) error

	// Embedding gathers rows of table [V, D] for ids (I32, any shape) into
	// out [ids…, D]. An id outside [0, V) is an error wrapping ErrValue.
	Embedding(out, table, ids *Tensor) error
	// EmbeddingBackward sets dtable to the scatter-sum of dout rows by ids
	// (rows never referenced become zero).
	EmbeddingBackward(dtable, dout, ids *Tensor) error

	// CrossEntropy sets loss[i] = logsumexp(logits[i]) − logits[i, t[i]]
	// for logits [N, V] and targets I32 [N]; loss is F32 [N]. Targets equal
	// to IgnoreIndex give 0.
	CrossEntropy(loss, logits, targets *Tensor) error
	// CrossEntropyBackward sets dlogits = scale·(softmax(logits) −
	// onehot(targets)); ignored rows get zeros. scale is the upstream
	// gradient of each row's loss, e.g. 1/N for a mean.
	CrossEntropyBackward(dlogits, logits, targets *Tensor, scale float32) error

	// AdamW applies one torch.optim.AdamW update to param with its gradient
	// grad, updating param and the moment estimates m and v IN PLACE (the
	// optimizer's state, zero before step 1): with g = grad,
	//
	//	param ← param·(1 − LR·WeightDecay)
	//	m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
	//	param ← param − LR/(1−β1^Step) · m / (sqrt(v)/sqrt(1−β2^Step) + Eps)
	//
	// All four tensors are F32 with one shape (any shape); grad is not
	// modified. Step ≥ 1, LR ≥ 0, 0 ≤ β1, β2 < 1, Eps > 0 and
	// WeightDecay ≥ 0, all finite, else the error wraps ErrValue.
	AdamW(param, grad, m, v *Tensor, p AdamWParams) error
	// AdamWAll applies one AdamW update with p to every parameter of ps,
	// each exactly as AdamW would (WeightDecay 0 where NoDecay is set),
	// and sets each Copy: a model's whole optimiser step, in one kernel
	// launch on a GPU. A Grad may also be F16 or BF16 (read as float32,
	// exactly). Parameters must not share tensors.
	AdamWAll(ps []AdamWParam, p AdamWParams) error
}

// AdamWParam is one parameter of Ops.AdamWAll's update.
type AdamWParam struct {
	// Param, M and V are F32 and updated in place; Grad, of Param's
	// shape, is F32, F16 or BF16 and only read.
	Param, Grad, M, V *Tensor
	// Copy, optional, of Param's shape in F16 or BF16, receives Param
	// after the update rounded to its dtype: the copy of a float32
	// master weight that a mixed-precision model reads.
	Copy *Tensor
	// NoDecay leaves the parameter out of weight decay (biases and norms).
	NoDecay bool
}
