package nn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

// TestInputs checks the checks every model's runner applies to its named
// inputs: names, presence, dtype, shape and count.
func TestInputs(t *testing.T) {
	ids := nn.Values{Shape: []int{2, 3}, I32: make([]int32, 6)}
	for _, tc := range []struct {
		name string
		in   map[string]nn.Values
		ints bool
		err  error
		msg  string
	}{
		{"ids alone", map[string]nn.Values{"input_ids": ids}, true, nil, ""},
		{"ids and mask", map[string]nn.Values{"input_ids": ids, "attention_mask": ids}, true, nil, ""},
		{"unknown", map[string]nn.Values{"input_ids": ids, "pixel_values": ids}, true, kernels.ErrValue, `unexpected input "pixel_values"`},
		{"missing", map[string]nn.Values{"attention_mask": ids}, true, kernels.ErrValue, `no input "input_ids"`},
		{"floats for ints", map[string]nn.Values{"input_ids": {Shape: []int{1}, F32: []float32{1}}}, true, kernels.ErrDType, "want integer values"},
		{"ints for floats", map[string]nn.Values{"input_ids": ids}, false, kernels.ErrDType, "want floating-point values"},
		{"mask of another shape", map[string]nn.Values{"input_ids": ids, "attention_mask": {Shape: []int{3, 2}, I32: make([]int32, 6)}}, true, kernels.ErrShape, "want [2 3] as input_ids"},
		{"count", map[string]nn.Values{"input_ids": {Shape: []int{2, 3}, I32: make([]int32, 5)}}, true, kernels.ErrShape, "5 values for shape [2 3]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := nn.Inputs(tc.in, tc.ints, "input_ids", "attention_mask")
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				assert.ErrorContains(t, err, tc.msg)
				return
			}
			require.NoError(t, err)
			require.Len(t, v, 2)
			assert.Equal(t, tc.in["input_ids"], v[0])
			assert.Equal(t, tc.in["attention_mask"], v[1], "nil where absent")
		})
	}
}

// TestTokenShape checks the batch and sequence length read from
// input_ids, and its errors.
func TestTokenShape(t *testing.T) {
	b, s, err := nn.TokenShape(map[string]nn.Values{"input_ids": {Shape: []int{4, 7}}})
	require.NoError(t, err)
	assert.Equal(t, [2]int{4, 7}, [2]int{b, s})
	_, _, err = nn.TokenShape(map[string]nn.Values{})
	require.ErrorIs(t, err, kernels.ErrValue)
	_, _, err = nn.TokenShape(map[string]nn.Values{"input_ids": {Shape: []int{4, 0}}})
	require.ErrorIs(t, err, kernels.ErrShape)
}

// TestTokenLengths checks the lengths of right-padded rows and the errors
// of ids outside the vocabulary and of masks that are not right padding.
func TestTokenLengths(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ids, mask []int32
		want      []int32
		err       string
	}{
		{"no mask", []int32{1, 2, 3, 4}, nil, []int32{2, 2}, ""},
		{"right padding", []int32{1, 2, 3, 4}, []int32{1, 0, 1, 1}, []int32{1, 2}, ""},
		{"id outside", []int32{1, 9, 3, 4}, nil, nil, "input_ids[0, 1] = 9 is outside the vocabulary [0, 5)"},
		{"ids count", []int32{1, 2, 3}, nil, nil, "input_ids has 3 values"},
		{"left padding", []int32{1, 2, 3, 4}, []int32{0, 1, 1, 1}, nil, "attention_mask row 0 is not 1…1 0…0"},
		{"empty row", []int32{1, 2, 3, 4}, []int32{1, 1, 0, 0}, nil, "attention_mask row 1 has no tokens"},
		{"mask count", []int32{1, 2, 3, 4}, []int32{1, 1, 1}, nil, "attention_mask has 3 values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nn.TokenLengths(tc.ids, tc.mask, 2, 2, 5)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
