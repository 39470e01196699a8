package quant_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/quant"
)

func TestConfigRoundTrip(t *testing.T) {
	data, err := json.Marshal(quant.NewConfig(quant.W8A8, "percentile", []string{"pooler.dense"}))
	require.NoError(t, err)
	s, ignore, err := quant.ParseConfig("config.json", data)
	require.NoError(t, err)
	require.Equal(t, quant.W8A8, s)
	require.Equal(t, []string{"pooler.dense"}, ignore)
	require.JSONEq(t, `{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel","dynamic":false,"group_size":null,"observer":"minmax","actorder":null}`,
		string(mustField(t, data, "config_groups", "group_0", "weights")))
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
		{"format", `{"quant_method":"compressed-tensors","format":"float-quantized"}`, "format = float-quantized"},
		{"status", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"frozen"}`, "quantization_status"},
		{"groups", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{}}`, "config_groups"},
		{"4-bit", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":4,"type":"int","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor"}}}}`, "g.weights = 4-bit int"},
		{"token", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"token","dynamic":true}}}}`, "input_activations.strategy = token"},
		{"asymmetric", `{"quant_method":"compressed-tensors","format":"int-quantized","quantization_status":"compressed","config_groups":{"g":{"targets":["Linear"],
			"weights":{"num_bits":8,"type":"int","symmetric":false,"strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","symmetric":true,"strategy":"tensor"}}}}`, "weights.symmetric"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := quant.ParseConfig("config.json", []byte(c.json))
			require.ErrorIs(t, err, kernels.ErrValue)
			require.Contains(t, err.Error(), c.want)
			require.Contains(t, err.Error(), "config.json")
		})
	}
	_, err := quant.ParseScheme("w4a16")
	require.ErrorIs(t, err, kernels.ErrValue)
}

// FuzzParseConfig checks that no input panics and that whatever parses is
// what NewConfig writes for its scheme.
func FuzzParseConfig(f *testing.F) {
	good, err := json.Marshal(quant.NewConfig(quant.W8A8, "entropy", []string{"pooler.dense"}))
	require.NoError(f, err)
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"quant_method":"compressed-tensors","config_groups":{"a":{"weights":null}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, ignore, err := quant.ParseConfig("fuzz.json", data)
		if err != nil {
			require.ErrorIs(t, err, kernels.ErrValue)
			return
		}
		again, err := json.Marshal(quant.NewConfig(s, "", ignore))
		require.NoError(t, err)
		s2, _, err := quant.ParseConfig("again.json", again)
		require.NoError(t, err)
		require.Equal(t, s, s2)
	})
}
