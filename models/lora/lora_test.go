package lora_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/lora"
)

func TestDefault(t *testing.T) {
	c := lora.Default()
	require.NoError(t, c.Validate())
	assert.Equal(t, lora.Config{R: 8, Alpha: 32, Dropout: 0.1, Targets: []string{"q_proj", "v_proj"}}, c)
	assert.Equal(t, 4.0, c.Scale())
	c.Targets[0] = "k_proj"
	assert.Equal(t, []string{"q_proj", "v_proj"}, lora.DefaultTargets, "Default returns a copy")
}

func TestValidate(t *testing.T) {
	ok := lora.Default()
	for _, tc := range []struct {
		name  string
		edit  func(c *lora.Config)
		field string // "" for a valid config
	}{
		{"default", func(c *lora.Config) {}, ""},
		{"all targets", func(c *lora.Config) { c.Targets = lora.Modules }, ""},
		{"zero dropout, negative alpha", func(c *lora.Config) { c.Dropout, c.Alpha = 0, -2 }, ""},
		{"zero rank", func(c *lora.Config) { c.R = 0 }, "r = 0"},
		{"negative rank", func(c *lora.Config) { c.R = -4 }, "r = -4"},
		{"NaN alpha", func(c *lora.Config) { c.Alpha = math.NaN() }, "lora_alpha"},
		{"infinite alpha", func(c *lora.Config) { c.Alpha = math.Inf(1) }, "lora_alpha"},
		{"dropout 1", func(c *lora.Config) { c.Dropout = 1 }, "lora_dropout"},
		{"negative dropout", func(c *lora.Config) { c.Dropout = -0.1 }, "lora_dropout"},
		{"NaN dropout", func(c *lora.Config) { c.Dropout = math.NaN() }, "lora_dropout"},
		{"no targets", func(c *lora.Config) { c.Targets = nil }, "target_modules"},
		{"unknown target", func(c *lora.Config) { c.Targets = []string{"q_proj", "lm_head"} }, `"lm_head"`},
		{"duplicate target", func(c *lora.Config) { c.Targets = []string{"q_proj", "q_proj"} }, "twice"},
		{"out of order", func(c *lora.Config) { c.Targets = []string{"v_proj", "q_proj"} }, "order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, lora.ErrConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestScale(t *testing.T) {
	for _, tc := range []struct {
		r      int
		alpha  float64
		rslora bool
		want   float64
	}{
		{8, 32, false, 4},
		{8, 16, false, 2},
		{16, 32, true, 8},
		{4, 8, true, 4},
		{8, 8, true, 8 / math.Sqrt(8)},
		{64, 16, false, 0.25},
	} {
		c := lora.Config{R: tc.r, Alpha: tc.alpha, RSLoRA: tc.rslora}
		assert.Equal(t, tc.want, c.Scale(), "%+v", tc)
	}
}

func TestParseTargets(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "q_proj,v_proj", want: []string{"q_proj", "v_proj"}},
		{in: " v_proj , q_proj ", want: []string{"q_proj", "v_proj"}},
		{in: "down_proj", want: []string{"down_proj"}},
		{in: "q_proj,q_proj,k_proj", want: []string{"q_proj", "k_proj"}},
		{in: "all-linear", want: lora.Modules},
		{in: "up_proj,all-linear", want: lora.Modules},
		{in: "gate_proj,o_proj,up_proj", want: []string{"o_proj", "gate_proj", "up_proj"}},
		{in: "", err: "empty name"},
		{in: "q_proj,", err: "empty name"},
		{in: "q_proj,lm_head", err: `unknown module "lm_head"`},
		{in: "self_attn.q_proj", err: "unknown module"},
		{in: "Q_PROJ", err: "unknown module"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := lora.ParseTargets(tc.in)
			if tc.err != "" {
				require.ErrorIs(t, err, lora.ErrConfig)
				assert.Contains(t, err.Error(), tc.err)
				assert.Contains(t, err.Error(), "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj or all-linear", "lists the valid names")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			c := lora.Default()
			c.Targets = got
			assert.NoError(t, c.Validate())
		})
	}
}
