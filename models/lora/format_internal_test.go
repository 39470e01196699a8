package lora

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPyFloat checks pyFloat against Python's json.dumps of floats.
func TestPyFloat(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want string
	}{
		{0.0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{0.1, "0.1"},
		{0.05, "0.05"},
		{1e-05, "1e-05"},
		{1.5e-05, "1.5e-05"},
		{0.0001, "0.0001"},
		{0.00012, "0.00012"},
		{1.0, "1.0"},
		{32.0, "32.0"},
		{1234567.5, "1234567.5"},
		{1e15, "1000000000000000.0"},
		{1e16, "1e+16"},
		{1.5e16, "1.5e+16"},
		{123456789012345.6, "123456789012345.6"},
		{0.3333333333333333, "0.3333333333333333"},
		{5e-324, "5e-324"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		{-2.5, "-2.5"},
	} {
		assert.Equal(t, tc.want, pyFloat(tc.x), "%v", tc.x)
	}
	assert.Equal(t, "32", pyNumber(32))
	assert.Equal(t, "32.5", pyNumber(32.5))
	assert.Equal(t, "1e+16", pyNumber(1e16))
}

// TestPyString checks pyString against Python's json.dumps of a string.
func TestPyString(t *testing.T) {
	assert.Equal(t, `"a\"b\\c\n\r\t\b\f\u0001\u001f \u007f \u00e9 \ud83e\udd99 <&>"`,
		pyString("a\"b\\c\n\r\t\b\f\x01\x1f \x7f é 🦙 <&>"))
	assert.Equal(t, `"a\ufffdb"`, pyString("a\xffb"))
}
