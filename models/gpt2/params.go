package gpt2

import (
	"fmt"
	"strings"

	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

// Names of the parameters outside the blocks, as in GPT2Model.
const (
	wteName = "wte.weight"
	wpeName = "wpe.weight"
	lnF     = "ln_f"
)

// blockParam names a tensor of block i.
func blockParam(i int, rest string) string { return fmt.Sprintf("h.%d.%s", i, rest) }

// The linear layers of a block, Hugging Face Conv1D modules: their weight
// is stored [in, out].
const (
	cAttn   = "attn.c_attn"
	attnOut = "attn.c_proj"
	cFC     = "mlp.c_fc"
	mlpOut  = "mlp.c_proj"
)

// Params lists the model's parameters in GPT2Model's order and with its
// names and shapes: the embeddings, the blocks, ln_f. A block's linear
// weights have Hugging Face's Conv1D layout, [in, out]; Load transposes
// them. lm_head is the token embeddings and has no parameter of its own.
func (c Config) Params() []nn.Param {
	H, I := c.NEmbd, c.Inner()
	var ps []nn.Param
	add := func(name string, shape ...int) { ps = append(ps, nn.Param{Name: name, Shape: shape}) }
	conv1D := func(name string, in, out int) {
		add(name+".weight", in, out)
		add(name+".bias", out)
	}
	norm := func(name string) {
		add(name+".weight", H)
		add(name+".bias", H)
	}
	add(wteName, c.VocabSize, H)
	add(wpeName, c.NPositions, H)
	for i := range c.NLayer {
		norm(blockParam(i, "ln_1"))
		conv1D(blockParam(i, cAttn), H, 3*H)
		conv1D(blockParam(i, attnOut), H, H)
		norm(blockParam(i, "ln_2"))
		conv1D(blockParam(i, cFC), H, I)
		conv1D(blockParam(i, mlpOut), I, H)
	}
	norm(lnF)
	return ps
}

// CountParams returns the number of parameter values of Params.
func (c Config) CountParams() int64 {
	var n int64
	for _, p := range c.Params() {
		n += int64(p.Len())
	}
	return n
}

// isConv1D reports whether the named parameter is a Conv1D weight, stored
// [in, out].
func isConv1D(name string) bool {
	return strings.HasSuffix(name, ".weight") && strings.Contains(name, ".c_")
}

// Synthetic returns seeded synthetic weights of any config, identical to
// testdata/reference/gpt2.py's synthetic_: a LayerNorm weight is uniform
// in 1 ± 0.1, any bias in ±0.02 and any other weight in ±0.05, each
// tensor from the stream of its GPT2Model name, Conv1D weights drawn in
// their [in, out] layout.
func Synthetic(seed uint64) nn.Source { return nn.Synthetic(seed, SyntheticRange) }

// SyntheticRange returns the center and half-width of the named
// parameter's synthetic values.
func SyntheticRange(name string) (center, half float64) {
	module, kind, _ := cutLast(name)
	_, last, _ := cutLast(module)
	switch {
	case kind == "weight" && strings.HasPrefix(last, "ln_"):
		return 1, 0.1
	case kind == "bias":
		return 0, 0.02
	}
	return 0, 0.05
}

// cutLast splits name at its last dot: "h.0.ln_1.weight" gives "h.0.ln_1"
// and "weight"; a name without a dot gives "" and itself.
func cutLast(name string) (before, after string, found bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return "", name, false
	}
	return name[:i], name[i+1:], true
}

// prefix is the prefix of GPT2LMHeadModel's base-model tensors.
const prefix = "transformer."

// names maps GPT-2's parameters to the tensors of a checkpoint whose
// base-model tensors carry pre ("transformer." in GPT2LMHeadModel
// checkpoints, none in GPT2Model's). The attention buffers (attn.bias,
// attn.masked_bias) that older checkpoints hold and the tied
// lm_head.weight may stay unread.
func names(pre string) nn.Names {
	return nn.Names{
		Model:      "gpt2",
		Candidates: func(param string) []string { return []string{pre + param} },
		Ignored: func(name string) bool {
			if name == "lm_head.weight" {
				return true
			}
			rest, ok := strings.CutPrefix(name, pre)
			return ok && (strings.HasSuffix(rest, ".attn.bias") || strings.HasSuffix(rest, ".attn.masked_bias"))
		},
	}
}

// OpenCheckpoint opens a safetensors checkpoint with Hugging Face GPT-2
// names: one file, or the shards of a sharded checkpoint.
func OpenCheckpoint(paths ...string) (*nn.Checkpoint, error) {
	files, err := nn.OpenFiles(paths)
	if err != nil {
		return nil, fmt.Errorf("gpt2: %w", err)
	}
	return NewCheckpoint(files...)
}

// NewCheckpoint wraps parsed safetensors files with Hugging Face GPT-2
// names, with or without GPT2LMHeadModel's "transformer." prefix: the one
// the token embeddings have.
func NewCheckpoint(files ...*safetensors.File) (*nn.Checkpoint, error) {
	pre, found := prefixOf(files)
	c, err := nn.NewCheckpoint(files, names(pre))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("gpt2: %v: no tensor %q or %q: not a GPT-2 checkpoint: %w",
			c, wteName, prefix+wteName, nn.ErrWeights)
	}
	return c, nil
}

// prefixOf returns the prefix of the token embeddings in files, preferring
// none, and whether they are there at all.
func prefixOf(files []*safetensors.File) (string, bool) {
	for _, p := range []string{"", prefix} {
		for _, f := range files {
			if _, err := f.Tensor(p + wteName); err == nil {
				return p, true
			}
		}
	}
	return "", false
}

// transpose returns the [cols, rows] transpose of v, row-major [rows,
// cols].
func transpose(v []float32, rows, cols int) []float32 {
	out := make([]float32, len(v))
	for r := range rows {
		for c := range cols {
			out[c*rows+r] = v[r*cols+c]
		}
	}
	return out
}
