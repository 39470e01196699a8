package bert

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/models/synth"
)

// ErrWeights marks a checkpoint that does not fit the config: a missing
// tensor, a wrong shape, a tensor the config has no place for.
var ErrWeights = errors.New("bad BERT weights")

// Param is one parameter: its Hugging Face name without the "bert." prefix
// of the pre-training checkpoints, and its shape.
type Param struct {
	Name  string
	Shape []int
}

// Len is the number of elements.
func (p Param) Len() int { return kernels.Shape(p.Shape).Len() }

// Head names of the masked-LM head, as in BertForMaskedLM and
// BertForPreTraining checkpoints. Its decoder is tied to the token
// embeddings and has no tensor of its own.
const (
	mlmDense     = "cls.predictions.transform.dense"
	mlmLayerNorm = "cls.predictions.transform.LayerNorm"
	mlmBias      = "cls.predictions.bias"
)

// layerParam names a tensor of encoder layer i.
func layerParam(i int, rest string) string { return fmt.Sprintf("encoder.layer.%d.%s", i, rest) }

// Params lists the model's parameters in a fixed order: embeddings, the
// encoder layers, then the pooler (if pooler) and the masked-LM head (if
// mlm).
func (c Config) Params(pooler, mlm bool) []Param {
	H, I := c.HiddenSize, c.IntermediateSize
	var ps []Param
	add := func(name string, shape ...int) { ps = append(ps, Param{name, shape}) }
	linear := func(name string, out, in int) {
		add(name+".weight", out, in)
		add(name+".bias", out)
	}
	norm := func(name string) {
		add(name+".weight", H)
		add(name+".bias", H)
	}
	add("embeddings.word_embeddings.weight", c.VocabSize, H)
	add("embeddings.position_embeddings.weight", c.MaxPositionEmbeddings, H)
	add("embeddings.token_type_embeddings.weight", c.TypeVocabSize, H)
	norm("embeddings.LayerNorm")
	for i := range c.NumHiddenLayers {
		for _, n := range []string{"query", "key", "value"} {
			linear(layerParam(i, "attention.self."+n), H, H)
		}
		linear(layerParam(i, "attention.output.dense"), H, H)
		norm(layerParam(i, "attention.output.LayerNorm"))
		linear(layerParam(i, "intermediate.dense"), I, H)
		linear(layerParam(i, "output.dense"), H, I)
		norm(layerParam(i, "output.LayerNorm"))
	}
	if pooler {
		linear("pooler.dense", H, H)
	}
	if mlm {
		linear(mlmDense, H, H)
		norm(mlmLayerNorm)
		add(mlmBias, c.VocabSize)
	}
	return ps
}

// CountParams returns the number of parameter values of Params(pooler, mlm).
func (c Config) CountParams(pooler, mlm bool) int64 {
	var n int64
	for _, p := range c.Params(pooler, mlm) {
		n += int64(p.Len())
	}
	return n
}

// Source supplies parameter values by name.
type Source interface {
	// Values returns the parameter's values, row-major, as float32. A
	// missing tensor or one of another shape is an error wrapping
	// ErrWeights.
	Values(p Param) ([]float32, error)
}

// syntheticSource is the seeded generator of package synth.
type syntheticSource uint64

// Synthetic returns seeded synthetic weights of any config, identical to
// testdata/reference/bert.py's synthetic_: a LayerNorm weight is uniform
// in 1 ± 0.1, a LayerNorm bias in ±0.05, any other bias in ±0.02 and any
// other weight in ±0.05, each tensor from the stream of its name.
func Synthetic(seed uint64) Source { return syntheticSource(seed) }

// SyntheticRange returns the center and half-width of the named
// parameter's synthetic values.
func SyntheticRange(name string) (center, half float64) {
	switch {
	case strings.HasSuffix(name, "LayerNorm.weight"):
		return 1, 0.1
	case strings.HasSuffix(name, "LayerNorm.bias"):
		return 0, 0.05
	case strings.HasSuffix(name, ".bias"):
		return 0, 0.02
	}
	return 0, 0.05
}

func (s syntheticSource) Values(p Param) ([]float32, error) {
	c, h := SyntheticRange(p.Name)
	return synth.Uniform(uint64(s), p.Name, p.Len(), c, h), nil
}

// Checkpoint is a safetensors checkpoint with Hugging Face BERT names,
// with or without the "bert." prefix of BertForPreTraining and
// BertForMaskedLM checkpoints. Old checkpoints' LayerNorm.gamma and
// LayerNorm.beta are read as LayerNorm.weight and LayerNorm.bias.
type Checkpoint struct {
	file   *safetensors.File
	prefix string
	used   map[string]bool
}

// floatDTypes are the safetensors dtypes weights may be stored in.
var floatDTypes = map[string]bool{"F64": true, "F32": true, "F16": true, "BF16": true, "F8_E4M3": true, "F8_E5M2": true}

// wordEmbeddings is the tensor that identifies a BERT checkpoint and its
// prefix.
const wordEmbeddings = "embeddings.word_embeddings.weight"

// OpenCheckpoint opens the safetensors checkpoint at path.
func OpenCheckpoint(path string) (*Checkpoint, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	return NewCheckpoint(f)
}

// NewCheckpoint wraps a parsed safetensors file.
func NewCheckpoint(f *safetensors.File) (*Checkpoint, error) {
	names := f.Tensors()
	has := func(n string) bool { _, ok := slices.BinarySearch(names, n); return ok }
	c := &Checkpoint{file: f, used: map[string]bool{}}
	switch {
	case has(wordEmbeddings):
	case has("bert." + wordEmbeddings):
		c.prefix = "bert."
	default:
		return nil, fmt.Errorf("bert: %s: no tensor %q or %q: not a BERT checkpoint: %w",
			c.where(), wordEmbeddings, "bert."+wordEmbeddings, ErrWeights)
	}
	return c, nil
}

func (c *Checkpoint) where() string {
	if c.file.Name() != "" {
		return c.file.Name()
	}
	return "checkpoint"
}

// fileName is the name p has in the file.
func (c *Checkpoint) fileName(name string) string {
	if strings.HasPrefix(name, "cls.") {
		return name
	}
	return c.prefix + name
}

// Values implements Source.
func (c *Checkpoint) Values(p Param) ([]float32, error) {
	name := c.fileName(p.Name)
	t, err := c.file.Tensor(name)
	if errors.Is(err, safetensors.ErrNotFound) {
		if alt, ok := strings.CutSuffix(name, "LayerNorm.weight"); ok {
			name = alt + "LayerNorm.gamma"
		} else if alt, ok := strings.CutSuffix(name, "LayerNorm.bias"); ok {
			name = alt + "LayerNorm.beta"
		}
		t, err = c.file.Tensor(name)
	}
	if errors.Is(err, safetensors.ErrNotFound) {
		return nil, fmt.Errorf("bert: %s: missing tensor %q (check config.json matches the weights): %w", c.where(), c.fileName(p.Name), ErrWeights)
	}
	if err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	if !slices.Equal(t.Shape, p.Shape) {
		return nil, fmt.Errorf("bert: %s: tensor %q has shape %v, the config wants %v: %w",
			c.where(), name, t.Shape, p.Shape, ErrWeights)
	}
	if _, ok := floatDTypes[t.DType]; !ok {
		return nil, fmt.Errorf("bert: %s: tensor %q has dtype %s; weights must be floating point: %w",
			c.where(), name, t.DType, ErrWeights)
	}
	v, err := t.Float32()
	if err != nil {
		return nil, fmt.Errorf("bert: %s: %w", c.where(), err)
	}
	c.used[name] = true
	return v, nil
}

// ignored reports whether a tensor of the file that no parameter read is
// one a BERT checkpoint may carry for other uses: heads of other tasks, the
// tied decoder, the pooler (when training), the position_ids buffer.
func (c *Checkpoint) ignored(name string) bool {
	rest, ok := strings.CutPrefix(name, c.prefix)
	return !ok || strings.HasPrefix(name, "cls.") || strings.HasPrefix(rest, "pooler.") ||
		rest == "embeddings.position_ids"
}

// CheckUnused returns an error naming the first tensor of the model's
// part of the file that no Values call read: a tensor the config has no
// place for (a 24-layer checkpoint with a 12-layer config, say).
func (c *Checkpoint) CheckUnused() error {
	for _, n := range c.file.Tensors() {
		if !c.used[n] && !c.ignored(n) {
			return fmt.Errorf("bert: %s: tensor %q is not used by the config (check config.json matches the weights): %w",
				c.where(), n, ErrWeights)
		}
	}
	return nil
}
