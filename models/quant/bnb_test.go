package quant_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/quant"
)

// TestBNBConfig checks bitsandbytes' quantization_config: what NewConfig
// writes for NF4 (the keys transformers reads), that it parses back, and
// that configs of what is not read (LLM.int8(), FP4, double
// quantization, other storage) are refused naming the key.
func TestBNBConfig(t *testing.T) {
	data, err := json.Marshal(quant.NewConfig(quant.Spec{Scheme: quant.NF4, Group: 64, Ignore: []string{"lm_head"}}))
	require.NoError(t, err)
	require.JSONEq(t, `{"quant_method":"bitsandbytes","load_in_4bit":true,"load_in_8bit":false,"bnb_4bit_quant_type":"nf4",
		"bnb_4bit_use_double_quant":false,"bnb_4bit_compute_dtype":"float32","bnb_4bit_quant_storage":"uint8",
		"llm_int8_skip_modules":["lm_head"]}`, string(data))
	s, err := quant.ParseConfig("config.json", data)
	require.NoError(t, err)
	assert.Equal(t, quant.Spec{Scheme: quant.NF4, Ignore: []string{"lm_head"}}, s, "the block size is each weight's")
	f, ok := s.Scheme.WeightOnly()
	assert.True(t, ok)
	assert.Equal(t, kernels.WNF4, f)

	// As transformers writes it, with keys that do not matter and no skip list.
	s, err = quant.ParseConfig("config.json", []byte(`{"_load_in_4bit":true,"_load_in_8bit":false,"bnb_4bit_compute_dtype":"bfloat16",
		"bnb_4bit_quant_storage":"uint8","bnb_4bit_quant_type":"nf4","bnb_4bit_use_double_quant":false,"llm_int8_enable_fp32_cpu_offload":false,
		"llm_int8_has_fp16_weight":false,"llm_int8_skip_modules":null,"llm_int8_threshold":6.0,"load_in_4bit":true,"load_in_8bit":false,
		"quant_method":"bitsandbytes"}`))
	require.NoError(t, err)
	assert.Equal(t, quant.Spec{Scheme: quant.NF4}, s)

	for _, c := range []struct{ json, want string }{
		{`{"quant_method":"bitsandbytes","load_in_8bit":true}`, "load_in_4bit = false"},
		{`{"quant_method":"bitsandbytes","load_in_4bit":true,"bnb_4bit_quant_type":"fp4"}`, "bnb_4bit_quant_type = fp4"},
		{`{"quant_method":"bitsandbytes","load_in_4bit":true,"bnb_4bit_quant_type":"nf4","bnb_4bit_use_double_quant":true}`, "bnb_4bit_use_double_quant = true"},
		{`{"quant_method":"bitsandbytes","load_in_4bit":true,"bnb_4bit_quant_type":"nf4","bnb_4bit_quant_storage":"bfloat16"}`, "bnb_4bit_quant_storage = bfloat16"},
		{`{"quant_method":"bitsandbytes","load_in_4bit":"yes"}`, "bitsandbytes"},
	} {
		_, err := quant.ParseConfig("dir/config.json", []byte(c.json))
		require.ErrorIs(t, err, kernels.ErrValue, c.json)
		assert.ErrorContains(t, err, "dir/config.json: quantization_config")
		assert.ErrorContains(t, err, c.want)
	}
}

// TestBNBQuantState checks the quant_state JSON of a weight.
func TestBNBQuantState(t *testing.T) {
	q, err := quant.ParseBNBQuantState("w", []byte(`{"quant_type": "nf4", "absmax": null, "blocksize": 64, "dtype": "bfloat16", "shape": [8, 128]}`), 8, 128)
	require.NoError(t, err)
	assert.Equal(t, quant.BNBQuantState{QuantType: "nf4", BlockSize: 64, DType: "bfloat16", Shape: []int{8, 128}}, q)
	for _, c := range []struct{ json, want string }{
		{`{"quant_type":"fp4","blocksize":64,"shape":[8,128]}`, "quant_type"},
		{`{"quant_type":"nf4","blocksize":64,"shape":[8,64]}`, "shape [8 64]"},
		{`{"quant_type":"nf4","blocksize":48,"shape":[8,128]}`, "blocksize 48"},
		{`{"quant_type":"nf4","blocksize":0,"shape":[8,128]}`, "blocksize 0"},
		{`[]`, "cannot unmarshal"},
	} {
		_, err := quant.ParseBNBQuantState("model.w.quant_state", []byte(c.json), 8, 128)
		require.ErrorIs(t, err, kernels.ErrValue)
		assert.ErrorContains(t, err, "model.w.quant_state")
		assert.ErrorContains(t, err, c.want)
	}
	assert.Equal(t, []byte{0x21, 0xf0, 0x0f}, quant.SwapNibbles([]byte{0x12, 0x0f, 0xf0}))

	// Blocks of 64 over rows of 96 (a real down_proj's [64, 96] would be
	// [.., 11008]): groups of 32, each inside one block.
	q, err = quant.ParseBNBQuantState("w", []byte(`{"quant_type":"nf4","blocksize":64,"shape":[2,96]}`), 2, 96)
	require.NoError(t, err)
	assert.Equal(t, 32, q.BNBGroup(96))
	assert.Equal(t, []float32{1, 1, 2, 2, 3, 3}, q.BNBScales([]float32{1, 2, 3}, 2, 96),
		"row 0: block 0, block 0, block 1; row 1: block 1, block 2, block 2")
	q, err = quant.ParseBNBQuantState("w", []byte(`{"quant_type":"nf4","blocksize":256,"shape":[8,128]}`), 8, 128)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 1, 2, 2}, q.BNBScales([]float32{1, 2}, 4, 128)[:4], "a block over two rows")
}
