package llama

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

// quantizedSchemes are the checkpoint schemes a Llama is written and read
// in, and how a float model is converted to each.
var quantizedSchemes = []struct {
	name    string
	convert func(m *Model) error
	want    quant.Spec
}{
	{"w8a8", func(m *Model) error { _, err := m.Quantize(); return err },
		quant.Spec{Scheme: quant.W8A8, Dynamic: true, Ignore: []string{"lm_head"}}},
	{"w8a16", func(m *Model) error { _, err := m.QuantizeWeights(kernels.WInt8, 0); return err },
		quant.Spec{Scheme: quant.W8A16, Ignore: []string{"lm_head"}}},
	{"w4a16", func(m *Model) error { _, err := m.QuantizeWeights(kernels.WInt4, 32); return err },
		quant.Spec{Scheme: quant.W4A16, Group: 32, Ignore: []string{"lm_head"}}},
	{"nf4", func(m *Model) error { _, err := m.QuantizeWeights(kernels.WNF4, 32); return err },
		quant.Spec{Scheme: quant.NF4, Group: 32, Ignore: []string{"lm_head"}}},
	{"fp8", func(m *Model) error { _, err := m.QuantizeFP8(); return err },
		quant.Spec{Scheme: quant.FP8, Dynamic: true, Ignore: []string{"lm_head"}}},
}

// quantizedTestConfig has inputs of 64 and 96 values: groups of 32.
func quantizedTestConfig() Config {
	cfg := testConfig()
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumAttentionHeads = 64, 96, 8
	return cfg
}

// writeTensors writes tensors as a safetensors file in t's temporary
// directory and returns its path.
func writeTensors(t *testing.T, tensors []safetensors.Tensor) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, safetensors.Write(f, tensors, map[string]string{"format": "pt"}))
	require.NoError(t, f.Close())
	return path
}

// TestQuantizedCheckpointRoundTrip quantizes a model in each scheme, writes
// its checkpoint and quantization_config, reads both back and checks the
// reloaded model's logits are bit-identical.
func TestQuantizedCheckpointRoundTrip(t *testing.T) {
	for _, c := range quantizedSchemes {
		for _, p := range []nn.Precision{nn.F32, nn.BF16} {
			t.Run(c.name+"/"+p.String(), func(t *testing.T) {
				cfg := quantizedTestConfig()
				m := loadTest(t, cfg, p)
				require.NoError(t, c.convert(m))
				require.NotNil(t, m.Config.Quant)
				require.Equal(t, c.want, *m.Config.Quant)
				ids := toI32(randomIDs(3, 10, cfg.VocabSize))
				want, err := m.Forward(Inputs{IDs: ids}, 1, len(ids))
				require.NoError(t, err)
				tensors, err := m.QuantizedTensors()
				require.NoError(t, err)
				byName := map[string]safetensors.Tensor{}
				for _, tt := range tensors {
					byName[tt.Name] = tt
				}
				q := "model.layers.1.mlp.down_proj"
				switch c.want.Scheme {
				case quant.W8A8, quant.FP8:
					assert.Equal(t, map[quant.Scheme]string{quant.W8A8: "I8", quant.FP8: "F8_E4M3"}[c.want.Scheme], byName[q+".weight"].DType)
					assert.Equal(t, []int{64, 1}, byName[q+".weight_scale"].Shape)
				case quant.NF4:
					assert.Equal(t, "U8", byName[q+".weight"].DType)
					assert.Equal(t, []int{64 * 96 / 2, 1}, byName[q+".weight"].Shape)
					assert.Equal(t, []int{64 * 96 / 32}, byName[q+".weight.absmax"].Shape)
					assert.Equal(t, []int{16}, byName[q+".weight.quant_map"].Shape)
					assert.JSONEq(t, `{"quant_type":"nf4","blocksize":32,"dtype":"`+TorchDType(p)+`","shape":[64,96]}`,
						string(byName[q+".weight.quant_state.bitsandbytes__nf4"].Data))
				default:
					words := 96 / 4 // down_proj [64, 96]: four int8 codes a word
					if c.want.Scheme == quant.W4A16 {
						words = 96 / 8
						assert.Equal(t, []int{64, 3}, byName[q+".weight_scale"].Shape)
					}
					assert.Equal(t, "I32", byName[q+".weight_packed"].DType)
					assert.Equal(t, []int{64, words}, byName[q+".weight_packed"].Shape)
					assert.Equal(t, "I64", byName[q+".weight_shape"].DType)
					assert.Equal(t, []int{64, 96}, []int{int(binary.LittleEndian.Uint64(byName[q+".weight_shape"].Data)),
						int(binary.LittleEndian.Uint64(byName[q+".weight_shape"].Data[8:]))})
				}
				assert.Contains(t, byName, "lm_head.weight")
				assert.NotContains(t, byName, q+".weight_zero_point")

				// The config goes through JSON, as config.json.
				qc, err := json.Marshal(quant.NewConfig(*m.Config.Quant))
				require.NoError(t, err)
				spec, err := parseQuantization(qc)
				require.NoError(t, err)
				cfg.Quant = spec
				ck, err := OpenCheckpoint(writeTensors(t, tensors))
				require.NoError(t, err)
				back, err := Load(cpu.New(), cfg, ck, p)
				require.NoError(t, err)
				defer func() { require.NoError(t, back.Close()) }()
				require.True(t, back.Quantized())
				got, err := back.Forward(Inputs{IDs: ids}, 1, len(ids))
				require.NoError(t, err)
				require.Equal(t, want, got, "the reloaded model's logits")
				assert.Equal(t, m.WeightBytes(), back.WeightBytes())
			})
		}
	}
}

// TestPackedLayout checks weight_packed against compressed-tensors'
// pack_to_int32 worked by hand: codes offset to unsigned, packed from the
// low bits of a little-endian int32 up.
func TestPackedLayout(t *testing.T) {
	cfg := quantizedTestConfig()
	cfg.NumHiddenLayers = 1
	for _, c := range quantizedSchemes[1:3] {
		t.Run(c.name, func(t *testing.T) {
			m := loadTest(t, cfg, nn.F32)
			require.NoError(t, c.convert(m))
			tensors, err := m.QuantizedTensors()
			require.NoError(t, err)
			i := slices.IndexFunc(tensors, func(tt safetensors.Tensor) bool { return tt.Name == "model.layers.0.self_attn.q_proj.weight_packed" })
			require.GreaterOrEqual(t, i, 0)
			words := tensors[i].Data
			lin := m.w.layers[0].q.WO
			codes := make([]byte, lin.Data.Bytes())
			require.NoError(t, m.be.Download(codes, lin.Data))
			bits := lin.Format.Bits()
			levels := lin.Format.Levels()
			for e := range 64 { // the first row's values, in order
				word := binary.LittleEndian.Uint32(words[4*(e/(32/bits)):])
				stored := int(word >> (bits * (e % (32 / bits))) & (1<<bits - 1))
				var code int
				if bits == 8 {
					code = int(int8(codes[e]))
				} else {
					code = int(levels[codes[e/2]>>(4*(e%2))&15])
				}
				require.Equal(t, code+1<<(bits-1), stored, "value %d", e)
			}
		})
	}
}

// TestNF4Layout checks bitsandbytes' byte order: the first of two
// values in the high nibble, and the absmax per block of the flattened
// weight.
func TestNF4Layout(t *testing.T) {
	cfg := quantizedTestConfig()
	cfg.NumHiddenLayers = 1
	m := loadTest(t, cfg, nn.F32)
	require.NoError(t, quantizedSchemes[3].convert(m))
	tensors, err := m.QuantizedTensors()
	require.NoError(t, err)
	byName := map[string]safetensors.Tensor{}
	for _, tt := range tensors {
		byName[tt.Name] = tt
	}
	const w = "model.layers.0.self_attn.q_proj.weight"
	lin := m.w.layers[0].q.WO
	codes := make([]byte, lin.Data.Bytes())
	require.NoError(t, m.be.Download(codes, lin.Data))
	for e := range 64 {
		stored := byName[w].Data[e/2] >> 4
		if e%2 == 1 {
			stored = byName[w].Data[e/2] & 15
		}
		require.Equal(t, codes[e/2]>>(4*(e%2))&15, stored, "value %d", e)
	}
	scales, err := kernels.ToFloat32(lin.Scales)
	require.NoError(t, err)
	absmax, err := byName[w+".absmax"].Float32()
	require.NoError(t, err)
	require.Equal(t, scales, absmax)
}

// TestQuantizedCheckpointErrors checks that a damaged or foreign quantized
// checkpoint is refused, naming what is wrong.
func TestQuantizedCheckpointErrors(t *testing.T) {
	cfg := quantizedTestConfig()
	cfg.NumHiddenLayers = 1
	m := loadTest(t, cfg, nn.F32)
	_, err := m.QuantizeWeights(kernels.WInt4, 32)
	require.NoError(t, err)
	good, err := m.QuantizedTensors()
	require.NoError(t, err)
	spec := *m.Config.Quant
	edit := func(name string, f func(*safetensors.Tensor)) []safetensors.Tensor {
		out := slices.Clone(good)
		for i := range out {
			if out[i].Name == name {
				out[i].Data = slices.Clone(out[i].Data)
				f(&out[i])
			}
		}
		return out
	}
	const q = "model.layers.0.self_attn.q_proj"
	cases := []struct {
		name    string
		tensors []safetensors.Tensor
		spec    quant.Spec
		want    string
	}{
		{"shape", edit(q+".weight_shape", func(t *safetensors.Tensor) { t.Data[0] = 63 }), spec, q + ".weight_shape is [63 64]"},
		{"packed dtype", edit(q+".weight_packed", func(t *safetensors.Tensor) { t.DType = "F32" }), spec, "dtype F32; want I32"},
		{"scale", edit(q+".weight_scale", func(t *safetensors.Tensor) { t.Data[3] = 0xff }), spec, q + ".weight_scale[0] = NaN"},
		{"missing", slices.DeleteFunc(slices.Clone(good), func(t safetensors.Tensor) bool { return t.Name == q+".weight_packed" }), spec, q + ".weight_packed"},
		{"extra", append(slices.Clone(good), safetensors.Tensor{Name: q + ".weight_zero_point", DType: "I32", Shape: []int{1}, Data: make([]byte, 4)}), spec, "weight_zero_point\" is not used"},
		{"group", good, quant.Spec{Scheme: quant.W4A16, Group: 64, Ignore: []string{"lm_head"}}, "weight_scale\" has shape [64 2], the config wants [64 1]"},
		{"scheme", good, quant.Spec{Scheme: quant.W8A16, Ignore: []string{"lm_head"}}, "weight_packed\" has shape [64 8], the config wants [64 16]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ck, err := OpenCheckpoint(writeTensors(t, c.tensors))
			require.NoError(t, err)
			cfg := cfg
			cfg.Quant = &c.spec
			_, err = Load(cpu.New(), cfg, ck, nn.F32)
			require.ErrorIs(t, err, nn.ErrWeights)
			require.ErrorContains(t, err, c.want)
		})
	}
	cfg.Quant = &spec
	_, err = Load(cpu.New(), cfg, Synthetic(1), nn.F32)
	require.ErrorIs(t, err, ErrInput, "synthetic weights for a quantized config")
	ck, err := OpenCheckpoint(writeTensors(t, good))
	require.NoError(t, err)
	_, err = Load(floatOnly{cpu.New(), cpu.New()}, cfg, ck, nn.F32)
	require.ErrorIs(t, err, kernels.ErrUnsupported)
}

// TestParseQuantizationConfig checks which quantization_configs a Llama
// config.json may carry.
func TestParseQuantizationConfig(t *testing.T) {
	ok := []quant.Spec{
		{Scheme: quant.W8A8, Dynamic: true, Ignore: []string{"lm_head"}},
		{Scheme: quant.W8A16, Ignore: []string{"re:.*lm_head"}},
		{Scheme: quant.W4A16, Group: 128, Ignore: []string{"lm_head"}},
	}
	for _, s := range ok {
		qc, err := json.Marshal(quant.NewConfig(s))
		require.NoError(t, err)
		c, err := ParseConfig("config.json", []byte(`{"hidden_size":64,"num_attention_heads":8,"quantization_config":`+string(qc)+`}`))
		require.NoError(t, err)
		require.Equal(t, &s, c.Quant)
	}
	bad := []struct {
		spec quant.Spec
		want string
	}{
		{quant.Spec{Scheme: quant.W8A8, Method: "absmax", Ignore: []string{"lm_head"}}, "static input scales"},
		{quant.Spec{Scheme: quant.W4A16, Group: 48, Ignore: []string{"lm_head"}}, "group_size 48"},
		{quant.Spec{Scheme: quant.W8A16}, "ignore is empty"},
		{quant.Spec{Scheme: quant.W8A16, Ignore: []string{"lm_head", "model.layers.0.mlp.down_proj"}}, "model.layers.0.mlp.down_proj"},
	}
	for _, b := range bad {
		qc, err := json.Marshal(quant.NewConfig(b.spec))
		require.NoError(t, err)
		_, err = ParseConfig("dir/config.json", []byte(`{"quantization_config":`+string(qc)+`}`))
		require.ErrorIs(t, err, ErrConfig)
		require.ErrorContains(t, err, "dir/config.json: quantization_config")
		require.ErrorContains(t, err, b.want)
	}
	_, err := ParseConfig("config.json", []byte(`{"quantization_config":{"quant_method":"gptq","bits":4}}`))
	require.ErrorContains(t, err, "quant_method = gptq")
}
