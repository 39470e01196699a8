package quant_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/quant"
)

func TestConfigRoundTrip(t *testing.T) {
	cases := []struct {
		name    string
		spec    quant.Spec
		format  string
		weights string
		inputs  string
		targets string // "" for ["Linear"]
	}{
		{"w8a8 static", quant.Spec{Scheme: quant.W8A8, Method: "percentile", Ignore: []string{"pooler.dense"}}, "int-quantized",
			`{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel","dynamic":false,"group_size":null,"observer":"minmax","actorder":null}`,
			`{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor","dynamic":false,"group_size":null,"observer":"percentile","actorder":null}`, ""},
		{"w8a8 dynamic", quant.Spec{Scheme: quant.W8A8, Dynamic: true, Ignore: []string{"lm_head"}}, "int-quantized",
			`{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel","dynamic":false,"group_size":null,"observer":"minmax","actorder":null}`,
			`{"num_bits":8,"type":"int","symmetric":true,"strategy":"token","dynamic":true,"group_size":null,"actorder":null}`, ""},
		{"w8a8 static conv", quant.Spec{Scheme: quant.W8A8, Method: "entropy", Targets: quant.ConvTargets()}, "int-quantized",
			`{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel","dynamic":false,"group_size":null,"observer":"minmax","actorder":null}`,
			`{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor","dynamic":false,"group_size":null,"observer":"entropy","actorder":null}`,
			`["Conv2d","Linear"]`},
		{"w8a16", quant.Spec{Scheme: quant.W8A16, Ignore: []string{"lm_head"}}, "pack-quantized",
			`{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel","dynamic":false,"group_size":null,"observer":"minmax","actorder":null}`, `null`, ""},
		{"w4a16", quant.Spec{Scheme: quant.W4A16, Group: 128, Ignore: []string{"lm_head"}}, "pack-quantized",
			`{"num_bits":4,"type":"int","symmetric":true,"strategy":"group","dynamic":false,"group_size":128,"observer":"minmax","actorder":null}`, `null`, ""},
		{"fp8", quant.Spec{Scheme: quant.FP8, Dynamic: true, Ignore: []string{"lm_head"}}, "float-quantized",
			`{"num_bits":8,"type":"float","symmetric":true,"strategy":"channel","dynamic":false,"group_size":null,"observer":"minmax","actorder":null}`,
			`{"num_bits":8,"type":"float","symmetric":true,"strategy":"token","dynamic":true,"group_size":null,"actorder":null}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, err := json.Marshal(quant.NewConfig(c.spec))
			require.NoError(t, err)
			s, err := quant.ParseConfig("config.json", data)
			require.NoError(t, err)
			want := c.spec
			want.Method = ""
			require.Equal(t, want, s)
			require.JSONEq(t, `"`+c.format+`"`, string(mustField(t, data, "format")))
			require.JSONEq(t, c.weights, string(mustField(t, data, "config_groups", "group_0", "weights")))
			require.JSONEq(t, c.inputs, string(mustField(t, data, "config_groups", "group_0", "input_activations")))
			targets := c.targets
			if targets == "" {
				targets = `["Linear"]`
			}
			require.JSONEq(t, targets, string(mustField(t, data, "config_groups", "group_0", "targets")))
		})
	}
}

// TestConfigTargets checks that ["Linear"], the default, reads back as
// nil however it was asked for, and that ConvTargets is a copy.
func TestConfigTargets(t *testing.T) {
	for _, targets := range [][]string{nil, {}, {"Linear"}} {
		data, err := json.Marshal(quant.NewConfig(quant.Spec{Scheme: quant.W8A8, Targets: targets}))
		require.NoError(t, err)
		require.JSONEq(t, `["Linear"]`, string(mustField(t, data, "config_groups", "group_0", "targets")))
		s, err := quant.ParseConfig("config.json", data)
		require.NoError(t, err)
		require.Nil(t, s.Targets, "%q", targets)
	}
	c := quant.ConvTargets()
	c[0] = "Embedding"
	require.Equal(t, []string{"Conv2d", "Linear"}, quant.ConvTargets())
}

// mustField returns the raw JSON at path in the object data.
func mustField(t *testing.T, data []byte, path ...string) json.RawMessage {
	t.Helper()
	raw := json.RawMessage(data)
	for _, k := range path {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &m))
		raw = m[k]
	}
	return raw
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct{ name, json, want string }{
		{"not an object", `[1]`, "quantization_config"},
		{"method", `{"quant_method":"gptq"}`, "quant_method = gptq"},
		{"format", `{"quant_method":"compressed-tensors","format":"nvfp4-pack-quantized"}`, "format = nvfp4-pack-quantized"},
		{"fp8 static", `{"quant_method":"compressed-tensors","format":"float-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":8,"type":"float","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"float","symmetric":true,"strategy":"tensor"}}}}`, "input_activations.strategy = tensor"},
		{"fp8 block", `{"quant_method":"compressed-tensors","format":"float-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":8,"type":"float","symmetric":true,"strategy":"block"},"input_activations":{"num_bits":8,"type":"float","symmetric":true,"strategy":"group","group_size":128,"dynamic":true}}}}`, "weights.strategy = block"},
		{"fp8 int weights", `{"quant_method":"compressed-tensors","format":"float-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"float","symmetric":true,"strategy":"token","dynamic":true}}}}`, "weights = 8-bit int"},
		{"status", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"frozen"}`, "quantization_status"},
		{"groups", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{}}`, "config_groups"},
		{"conv only", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Conv2d"],
			"weights":{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor"}}}}`, "g.targets = [Conv2d]"},
		{"targets order", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear","Conv2d"],
			"weights":{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor"}}}}`, "g.targets = [Linear Conv2d]"},
		{"no targets", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"g":{
			"weights":{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor"}}}}`, "g.targets = []"},
		{"4-bit w8a8", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":4,"type":"int","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor"}}}}`, "g.weights.num_bits = 4"},
		{"static token", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"token"}}}}`, "input_activations.strategy = token"},
		{"dynamic tensor", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor","dynamic":true}}}}`, "input_activations.strategy = tensor"},
		{"asymmetric", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":8,"type":"int","symmetric":false,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor"}}}}`, "weights.symmetric"},
		{"weight-only unpacked", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel"}}}}`, "input_activations = null"},
		{"packed with inputs", `{"quant_method":"compressed-tensors","format":"pack-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor"}}}}`, "input_activations = set"},
		{"int4 per channel", `{"quant_method":"compressed-tensors","format":"pack-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":4,"type":"int","symmetric":true,"strategy":"channel"}}}}`, "weights.strategy = channel"},
		{"int4 no group", `{"quant_method":"compressed-tensors","format":"pack-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":4,"type":"int","symmetric":true,"strategy":"group"}}}}`, "weights.group_size"},
		{"actorder", `{"quant_method":"compressed-tensors","format":"pack-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":4,"type":"int","symmetric":true,"strategy":"group","group_size":128,"actorder":"group"}}}}`, "weights.actorder = group"},
		{"3-bit", `{"quant_method":"compressed-tensors","format":"pack-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":3,"type":"int","symmetric":true,"strategy":"group","group_size":128}}}}`, "weights.num_bits = 3"},
		{"float", `{"quant_method":"compressed-tensors","format":"pack-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":4,"type":"float","symmetric":true,"strategy":"group","group_size":16}}}}`, "weights.type = float"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := quant.ParseConfig("config.json", []byte(c.json))
			require.ErrorIs(t, err, kernels.ErrValue)
			require.Contains(t, err.Error(), c.want)
			require.Contains(t, err.Error(), "config.json")
		})
	}
	_, err := quant.ParseScheme("fp4")
	require.ErrorIs(t, err, kernels.ErrValue)
}

// FuzzParseConfig checks that no input panics and that whatever parses is
// what NewConfig writes for its scheme.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []quant.Spec{{Scheme: quant.W8A8, Method: "entropy", Ignore: []string{"pooler.dense"}},
		{Scheme: quant.W8A8, Method: "absmax", Targets: quant.ConvTargets()},
		{Scheme: quant.W8A8, Dynamic: true}, {Scheme: quant.W8A16}, {Scheme: quant.W4A16, Group: 128, Ignore: []string{"lm_head"}},
		{Scheme: quant.NF4, Ignore: []string{"lm_head"}}, {Scheme: quant.FP8, Dynamic: true}} {
		good, err := json.Marshal(quant.NewConfig(s))
		require.NoError(f, err)
		f.Add(good)
	}
	f.Add([]byte(`{}`))
	// No "ignore": NewConfig writes [], which must read back as none.
	f.Add([]byte(`{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"":{"targets":["Linear"],
		"weights":{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor"}}}}`))
	f.Add([]byte(`{"quant_method":"compressed-tensors","config_groups":{"a":{"weights":null}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := quant.ParseConfig("fuzz.json", data)
		if err != nil {
			require.ErrorIs(t, err, kernels.ErrValue)
			return
		}
		again, err := json.Marshal(quant.NewConfig(s))
		require.NoError(t, err)
		s2, err := quant.ParseConfig("again.json", again)
		require.NoError(t, err)
		require.Equal(t, s, s2)
	})
}
