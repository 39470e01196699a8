package bert

import (
	"fmt"
	"strings"

	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

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
func (c Config) Params(pooler, mlm bool) []nn.Param {
	H, I := c.HiddenSize, c.IntermediateSize
	var ps []nn.Param
	add := func(name string, shape ...int) { ps = append(ps, nn.Param{Name: name, Shape: shape}) }
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
		for _, n := range qkvNames {
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

// Synthetic returns seeded synthetic weights of any config, identical to
// testdata/reference/bert.py's synthetic_: a LayerNorm weight is uniform
// in 1 ± 0.1, a LayerNorm bias in ±0.05, any other bias in ±0.02 and any
// other weight in ±0.05, each tensor from the stream of its name.
func Synthetic(seed uint64) nn.Source { return nn.Synthetic(seed, SyntheticRange) }

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

// wordEmbeddings is the tensor that identifies a BERT checkpoint and its
// prefix.
const wordEmbeddings = "embeddings.word_embeddings.weight"

// names maps BERT's parameters to the tensors of a checkpoint whose
// base-model tensors carry prefix ("bert." in BertForPreTraining and
// BertForMaskedLM checkpoints, none in BertModel's). The masked-LM head's
// cls.* tensors never have it. Old checkpoints' LayerNorm.gamma and
// LayerNorm.beta are read as LayerNorm.weight and LayerNorm.bias. A
// checkpoint may carry tensors for other uses: heads of other tasks, the
// tied decoder, the pooler (when training), the position_ids buffer.
func names(prefix string) nn.Names {
	return nn.Names{
		Model: "bert",
		Candidates: func(param string) []string {
			name := param
			if !strings.HasPrefix(param, "cls.") {
				name = prefix + param
			}
			if alt, ok := strings.CutSuffix(name, "LayerNorm.weight"); ok {
				return []string{name, alt + "LayerNorm.gamma"}
			}
			if alt, ok := strings.CutSuffix(name, "LayerNorm.bias"); ok {
				return []string{name, alt + "LayerNorm.beta"}
			}
			return []string{name}
		},
		Ignored: func(name string) bool {
			rest, ok := strings.CutPrefix(name, prefix)
			return !ok || strings.HasPrefix(name, "cls.") || strings.HasPrefix(rest, "pooler.") ||
				rest == "embeddings.position_ids"
		},
	}
}

// OpenCheckpoint opens a safetensors checkpoint with Hugging Face BERT
// names: one file, or the shards of a sharded checkpoint.
func OpenCheckpoint(paths ...string) (*nn.Checkpoint, error) {
	files, err := nn.OpenFiles(paths)
	if err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	return NewCheckpoint(files...)
}

// NewCheckpoint wraps parsed safetensors files with Hugging Face BERT
// names, with or without the "bert." prefix of BertForPreTraining and
// BertForMaskedLM checkpoints: the one the word embeddings have.
func NewCheckpoint(files ...*safetensors.File) (*nn.Checkpoint, error) {
	prefix, found := prefixOf(files)
	c, err := nn.NewCheckpoint(files, names(prefix))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("bert: %v: no tensor %q or %q: not a BERT checkpoint: %w",
			c, wordEmbeddings, "bert."+wordEmbeddings, nn.ErrWeights)
	}
	return c, nil
}

// prefixOf returns the prefix of the word embeddings in files, preferring
// none, and whether they are there at all.
func prefixOf(files []*safetensors.File) (string, bool) {
	for _, p := range []string{"", "bert."} {
		for _, f := range files {
			if _, err := f.Tensor(p + wordEmbeddings); err == nil {
				return p, true
			}
		}
	}
	return "", false
}
