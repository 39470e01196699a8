package lora_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/lora"
)

// FuzzParseConfig checks that ParseConfig never panics, and that what it
// accepts is valid and survives Marshal and ParseConfig unchanged.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(peftConfig))
	f.Add([]byte(defaultJSON))
	for _, edit := range [][2]string{
		{"target_modules", `"all-linear"`},
		{"target_modules", `["mlp.down_proj", "q_proj", "q_proj"]`},
		{"target_modules", `".*proj"`},
		{"target_modules", `null`},
		{"use_rslora", `true`},
		{"use_dora", `true`},
		{"lora_alpha", `0.5`},
		{"lora_alpha", `-1e300`},
		{"lora_dropout", `0.999999`},
		{"r", `0`},
		{"r", `9223372036854775807`},
		{"bias", `"all"`},
		{"rank_pattern", `{"q_proj": 4}`},
		{"base_model_name_or_path", `"\u00e9\ud83e\udd99\u0000"`},
		{"peft_type", ``},
	} {
		f.Add(withField(f, edit[0], edit[1]))
	}
	f.Add([]byte(`{"peft_type":"LORA","r":1,"lora_alpha":1}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := lora.ParseConfig("fuzz.json", data)
		if err != nil {
			require.ErrorIs(t, err, lora.ErrConfig)
			return
		}
		require.NoError(t, c.Validate())
		b, err := c.Marshal()
		require.NoError(t, err)
		again, err := lora.ParseConfig("fuzz.json", b)
		require.NoError(t, err, "%s", b)
		assert.Equal(t, c, again, "%s", b)
	})
}
