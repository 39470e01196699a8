package bert_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

func tinyModelF32(t *testing.T) *bert.Model {
	t.Helper()
	ck, err := bert.OpenCheckpoint(tinyModel)
	require.NoError(t, err)
	return loadTiny(t, ck, nn.F32)
}

func TestSetInputsErrors(t *testing.T) {
	m := loadTiny(t, bert.Synthetic(5), nn.F32)
	f, err := m.NewForward(2, 4)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	ids := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	tests := []struct {
		name string
		in   bert.Inputs
		want string
	}{
		{"id past the vocabulary", bert.Inputs{IDs: []int32{1, 2, 3, 4, 5, 6, 99, 8}}, "input_ids[1, 2] = 99"},
		{"negative id", bert.Inputs{IDs: []int32{-1, 2, 3, 4, 5, 6, 7, 8}}, "input_ids[0, 0] = -1"},
		{"too few ids", bert.Inputs{IDs: ids[:7]}, "input_ids has 7 values"},
		{"too many ids", bert.Inputs{IDs: append(ids, 1)}, "input_ids has 9 values"},
		{"no ids", bert.Inputs{}, "input_ids has 0 values"},
		{"token type out of range", bert.Inputs{IDs: ids, TypeIDs: []int32{0, 0, 0, 0, 0, 2, 0, 0}}, "token_type_ids[1, 1] = 2"},
		{"negative token type", bert.Inputs{IDs: ids, TypeIDs: []int32{0, 0, 0, -1, 0, 0, 0, 0}}, "token_type_ids[0, 3] = -1"},
		{"token types of wrong length", bert.Inputs{IDs: ids, TypeIDs: []int32{0, 0}}, "token_type_ids has 2 values"},
		{"left padding", bert.Inputs{IDs: ids, Mask: []int32{1, 1, 1, 1, 0, 1, 1, 1}}, "attention_mask row 1"},
		{"hole in the mask", bert.Inputs{IDs: ids, Mask: []int32{1, 0, 1, 1, 1, 1, 1, 1}}, "attention_mask row 0"},
		{"mask value 2", bert.Inputs{IDs: ids, Mask: []int32{1, 1, 1, 1, 1, 1, 2, 0}}, "attention_mask row 1"},
		{"row of zeros", bert.Inputs{IDs: ids, Mask: []int32{1, 1, 1, 1, 0, 0, 0, 0}}, "attention_mask row 1 has no tokens"},
		{"mask of wrong length", bert.Inputs{IDs: ids, Mask: []int32{1, 1, 1}}, "attention_mask has 3 values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := f.SetInputs(tc.in)
			require.Error(t, err)
			assert.ErrorIs(t, err, bert.ErrInput)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// Valid inputs still work after the errors.
	require.NoError(t, f.SetInputs(bert.Inputs{IDs: ids, Mask: []int32{1, 1, 1, 1, 1, 0, 0, 0}}))
	require.NoError(t, f.Run())
}

func TestNewForwardErrors(t *testing.T) {
	m := loadTiny(t, bert.Synthetic(5), nn.F32)
	for _, tc := range []struct{ batch, seq int }{{1, 65}, {0, 4}, {2, 0}, {-1, 4}} {
		_, err := m.NewForward(tc.batch, tc.seq)
		assert.ErrorIs(t, err, bert.ErrInput, "batch %d seq %d", tc.batch, tc.seq)
	}
	_, err := m.NewForward(1, 65)
	assert.Contains(t, err.Error(), "max_position_embeddings 64")
	f, err := m.NewForward(1, 64)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestTinyGolden compares with testdata/golden/bert-tiny/output.safetensors
// (PyTorch, float64), every position including padded ones.
func TestTinyGolden(t *testing.T) {
	m := tinyModelF32(t)
	in, B, S := tinyInputs(t)
	hidden, pooled := run(t, m, in, B, S)
	out, err := safetensors.Open(tinyDir + "/output.safetensors")
	require.NoError(t, err)
	for _, c := range []struct {
		role string
		got  []float32
	}{{"last_hidden_state", hidden}, {"pooler_output", pooled}} {
		x, err := out.Tensor(c.role)
		require.NoError(t, err)
		want, err := x.Float32()
		require.NoError(t, err)
		require.Len(t, c.got, len(want))
		assert.Less(t, relErr(c.got, want), 2e-6, c.role)
		for i := range want {
			require.InDelta(t, want[i], c.got[i], 1e-5, "%s[%d]", c.role, i)
		}
	}
}

// TestPaddingMatchesUnpadded checks Hugging Face's padding semantics: the
// outputs at the valid positions of a right-padded row equal those of the
// row run alone with seq = its length.
func TestPaddingMatchesUnpadded(t *testing.T) {
	m := tinyModelF32(t)
	in, B, S := tinyInputs(t)
	H := m.Config.HiddenSize
	hidden, pooled := run(t, m, in, B, S)
	for b := range B {
		L := 0
		for L < S && in.Mask[b*S+L] == 1 {
			L++
		}
		t.Run(fmt.Sprintf("row %d length %d", b, L), func(t *testing.T) {
			row := bert.Inputs{IDs: in.IDs[b*S : b*S+L], TypeIDs: in.TypeIDs[b*S : b*S+L]}
			h1, p1 := run(t, m, row, 1, L)
			got := hidden[b*S*H : (b*S+L)*H]
			for i := range h1 {
				require.InDelta(t, h1[i], got[i], 1e-5*math.Max(1, math.Abs(float64(h1[i]))), "position %d, unit %d", i/H, i%H)
			}
			for i := range p1 {
				require.InDelta(t, p1[i], pooled[b*H+i], 1e-5*math.Max(1, math.Abs(float64(p1[i]))), "pooled %d", i)
			}
			// The same row padded with other ids and token types beyond L
			// gives the same valid outputs: padding is masked, whatever it holds.
			if L < S {
				other := bert.Inputs{IDs: append([]int32(nil), in.IDs...), TypeIDs: append([]int32(nil), in.TypeIDs...), Mask: in.Mask}
				for j := b*S + L; j < (b+1)*S; j++ {
					other.IDs[j], other.TypeIDs[j] = int32(j%90)+5, 1
				}
				h2, _ := run(t, m, other, B, S)
				assert.Equal(t, got, h2[b*S*H:(b*S+L)*H])
			}
		})
	}
	// A nil mask is an all-ones mask.
	ones := make([]int32, B*S)
	for i := range ones {
		ones[i] = 1
	}
	h1, _ := run(t, m, bert.Inputs{IDs: in.IDs, TypeIDs: in.TypeIDs, Mask: ones}, B, S)
	h2, _ := run(t, m, bert.Inputs{IDs: in.IDs, TypeIDs: in.TypeIDs}, B, S)
	assert.Equal(t, h1, h2)
	// Nil token types are all zeros.
	h1, _ = run(t, m, bert.Inputs{IDs: in.IDs, TypeIDs: make([]int32, B*S), Mask: in.Mask}, B, S)
	h2, _ = run(t, m, bert.Inputs{IDs: in.IDs, Mask: in.Mask}, B, S)
	assert.Equal(t, h1, h2)
}

// TestForwardReuse runs one Forward on two different inputs and back:
// nothing leaks from one run into the next.
func TestForwardReuse(t *testing.T) {
	m := tinyModelF32(t)
	in, B, S := tinyInputs(t)
	want, _ := run(t, m, in, B, S)
	f, err := m.NewForward(B, S)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	other := bert.Inputs{IDs: make([]int32, B*S)}
	for i := range other.IDs {
		other.IDs[i] = int32(i % 99)
	}
	for _, x := range []bert.Inputs{other, in, other, in} {
		require.NoError(t, f.SetInputs(x))
		require.NoError(t, f.Run())
	}
	got, err := f.LastHidden()
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// TestPrecisions runs the reduced precisions on the CPU backend against
// float32.
func TestPrecisions(t *testing.T) {
	ck, err := bert.OpenCheckpoint(tinyModel)
	require.NoError(t, err)
	in, B, S := tinyInputs(t)
	want, _ := run(t, loadTiny(t, ck, nn.F32), in, B, S)
	for _, tc := range []struct {
		p   nn.Precision
		tol float64
	}{{nn.Mixed, 1e-4}, {nn.F16, 5e-3}, {nn.BF16, 3e-2}} {
		t.Run(tc.p.String(), func(t *testing.T) {
			ck, err := bert.OpenCheckpoint(tinyModel)
			require.NoError(t, err)
			m := loadTiny(t, ck, tc.p)
			got, _ := run(t, m, in, B, S)
			e := relErr(got, want)
			t.Logf("%s: rel-err %.3g", tc.p, e)
			assert.Less(t, e, tc.tol)
			assert.Greater(t, e, 0.0, "the precision changes something")
		})
	}
}
