package lora_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/lora"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/synth"
)

// Sizes of the tiny Llama of the tests: hidden 16, grouped keys and values
// of 8, MLP 24.
const (
	hidden = 16
	kvDim  = 8
	mlpDim = 24
)

// dims gives the (in, out) sizes of the tiny Llama's modules.
func dims(module string) (in, out int) {
	switch module {
	case "k_proj", "v_proj":
		return hidden, kvDim
	case "gate_proj", "up_proj":
		return hidden, mlpDim
	case "down_proj":
		return mlpDim, hidden
	}
	return hidden, hidden
}

func TestTargetNames(t *testing.T) {
	for _, tc := range []struct {
		layer              int
		module             string
		path, a, b, weight string
	}{
		{0, "q_proj", "self_attn.q_proj",
			"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
			"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
			"model.layers.0.self_attn.q_proj.weight"},
		{1, "k_proj", "self_attn.k_proj",
			"base_model.model.model.layers.1.self_attn.k_proj.lora_A.weight",
			"base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight",
			"model.layers.1.self_attn.k_proj.weight"},
		{2, "v_proj", "self_attn.v_proj",
			"base_model.model.model.layers.2.self_attn.v_proj.lora_A.weight",
			"base_model.model.model.layers.2.self_attn.v_proj.lora_B.weight",
			"model.layers.2.self_attn.v_proj.weight"},
		{21, "o_proj", "self_attn.o_proj",
			"base_model.model.model.layers.21.self_attn.o_proj.lora_A.weight",
			"base_model.model.model.layers.21.self_attn.o_proj.lora_B.weight",
			"model.layers.21.self_attn.o_proj.weight"},
		{5, "gate_proj", "mlp.gate_proj",
			"base_model.model.model.layers.5.mlp.gate_proj.lora_A.weight",
			"base_model.model.model.layers.5.mlp.gate_proj.lora_B.weight",
			"model.layers.5.mlp.gate_proj.weight"},
		{10, "up_proj", "mlp.up_proj",
			"base_model.model.model.layers.10.mlp.up_proj.lora_A.weight",
			"base_model.model.model.layers.10.mlp.up_proj.lora_B.weight",
			"model.layers.10.mlp.up_proj.weight"},
		{3, "down_proj", "mlp.down_proj",
			"base_model.model.model.layers.3.mlp.down_proj.lora_A.weight",
			"base_model.model.model.layers.3.mlp.down_proj.lora_B.weight",
			"model.layers.3.mlp.down_proj.weight"},
	} {
		tg := lora.Target{Layer: tc.layer, Module: tc.module, In: 4, Out: 6}
		assert.Equal(t, tc.path, tg.Path())
		assert.Equal(t, tc.a, tg.AName())
		assert.Equal(t, tc.b, tg.BName())
		assert.Equal(t, tc.weight, tg.BaseName())
	}
}

func TestTargetsOf(t *testing.T) {
	c := lora.Config{R: 4, Alpha: 8, Targets: []string{"q_proj", "v_proj", "down_proj"}}
	ts := c.TargetsOf(2, dims)
	assert.Equal(t, []lora.Target{
		{0, "q_proj", hidden, hidden}, {0, "v_proj", hidden, kvDim}, {0, "down_proj", mlpDim, hidden},
		{1, "q_proj", hidden, hidden}, {1, "v_proj", hidden, kvDim}, {1, "down_proj", mlpDim, hidden},
	}, ts)
	assert.Empty(t, c.TargetsOf(0, dims))

	ps := c.Params(ts[1:3])
	assert.Equal(t, []nn.Param{
		{Name: "base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight", Shape: []int{4, hidden}},
		{Name: "base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight", Shape: []int{kvDim, 4}},
		{Name: "base_model.model.model.layers.0.mlp.down_proj.lora_A.weight", Shape: []int{4, mlpDim}},
		{Name: "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight", Shape: []int{hidden, 4}},
	}, ps)
}

func TestInit(t *testing.T) {
	const in, r, seed = 1024, 64, 7
	tg := lora.Target{Layer: 3, Module: "down_proj", In: in, Out: 32}
	src := lora.Init(seed)

	b, err := src.Values(nn.Param{Name: tg.BName(), Shape: tg.BShape(r)})
	require.NoError(t, err)
	assert.Equal(t, make([]float32, 32*r), b, "B starts at zero")

	a, err := src.Values(nn.Param{Name: tg.AName(), Shape: tg.AShape(r)})
	require.NoError(t, err)
	require.Len(t, a, r*in)
	bound := 1 / math.Sqrt(in)
	assert.Equal(t, synth.Uniform(seed, tg.AName(), r*in, 0, bound), a, "synth's stream of A's name")
	var sum, sq float64
	for _, x := range a {
		require.LessOrEqual(t, math.Abs(float64(x)), bound*(1+1e-7))
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	n := float64(len(a))
	mean := sum / n
	std := math.Sqrt(sq/n - mean*mean)
	// Kaiming-uniform with a = √5: std = gain/√fan_in = bound/√3.
	assert.InDelta(t, 0, mean/bound, 0.01)
	assert.InEpsilon(t, bound/math.Sqrt(3), std, 0.01)

	other, err := lora.Init(seed + 1).Values(nn.Param{Name: tg.AName(), Shape: tg.AShape(r)})
	require.NoError(t, err)
	assert.NotEqual(t, a, other, "the seed matters")

	for _, p := range []nn.Param{
		{Name: "model.layers.3.mlp.down_proj.weight", Shape: []int{32, in}},
		{Name: "base_model.model.model.layers.3.mlp.down_proj.lora_C.weight", Shape: []int{r, in}},
		{Name: "base_model.model.model.layers.03.mlp.down_proj.lora_A.weight", Shape: []int{r, in}},
		{Name: "base_model.model.model.layers.3.self_attn.down_proj.lora_A.weight", Shape: []int{r, in}},
		{Name: "base_model.model.model.layers.3.mlp.lm_head.lora_A.weight", Shape: []int{r, in}},
		{Name: tg.AName(), Shape: []int{r * in}},
		{Name: tg.AName(), Shape: []int{0, in}},
	} {
		_, err := src.Values(p)
		require.ErrorIs(t, err, nn.ErrWeights, "%v", p)
		assert.Contains(t, err.Error(), p.Name)
	}
}
