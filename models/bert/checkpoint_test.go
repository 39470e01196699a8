package bert_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

// fixedInputs is a batch of 2 rows of 5 tokens, the second padded to 3.
func fixedInputs() bert.Inputs {
	return bert.Inputs{
		IDs:     []int32{5, 17, 98, 0, 42, 3, 77, 1, 0, 0},
		TypeIDs: []int32{0, 0, 1, 1, 1, 0, 1, 1, 0, 0},
		Mask:    []int32{1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
	}
}

func loadOutputs(t *testing.T, path string) (hidden, pooled []float32) {
	t.Helper()
	ck, err := bert.OpenCheckpoint(path)
	require.NoError(t, err)
	m := loadTiny(t, ck, nn.F32)
	return run(t, m, fixedInputs(), 2, 5)
}

func TestCheckpointVariantsLoadIdentically(t *testing.T) {
	base := tinyTensors(t)
	wantH, wantP := loadOutputs(t, tinyModel)

	position := make([]byte, 8*64)
	for i := range 64 {
		binary.LittleEndian.PutUint64(position[8*i:], uint64(i))
	}
	posIDs := func(name string) safetensors.Tensor {
		return safetensors.Tensor{Name: name, DType: "I64", Shape: []int{1, 64}, Data: position}
	}
	decoder := func(prefix string) []safetensors.Tensor {
		return []safetensors.Tensor{
			f32Tensor(prefix+"cls.predictions.decoder.weight", make([]float32, 99*32), 99, 32),
			f32Tensor(prefix+"cls.predictions.decoder.bias", make([]float32, 99), 99),
		}
	}
	unprefixed := mapTensors(base, func(x *safetensors.Tensor) bool {
		x.Name = strings.TrimPrefix(x.Name, "bert.")
		return true
	})
	tests := []struct {
		name    string
		tensors []safetensors.Tensor
	}{
		{"as written", base},
		{"without the bert. prefix", unprefixed},
		{"LayerNorm.gamma and .beta", mapTensors(base, func(x *safetensors.Tensor) bool {
			if s, ok := strings.CutSuffix(x.Name, "LayerNorm.weight"); ok {
				x.Name = s + "LayerNorm.gamma"
			} else if s, ok := strings.CutSuffix(x.Name, "LayerNorm.bias"); ok {
				x.Name = s + "LayerNorm.beta"
			}
			return true
		})},
		{"gamma and beta without prefix", mapTensors(unprefixed, func(x *safetensors.Tensor) bool {
			if s, ok := strings.CutSuffix(x.Name, "LayerNorm.weight"); ok {
				x.Name = s + "LayerNorm.gamma"
			}
			return true
		})},
		{"BertModel only (no cls.*)", mapTensors(base, func(x *safetensors.Tensor) bool {
			return !strings.HasPrefix(x.Name, "cls.")
		})},
		{"position_ids, tied decoder, other heads", append(append(mapTensors(base, func(*safetensors.Tensor) bool { return true }),
			posIDs("bert.embeddings.position_ids"),
			f32Tensor("cls.other_head.weight", []float32{1, 2}, 2)),
			decoder("")...)},
		{"unprefixed with position_ids and decoder", append(append(mapTensors(unprefixed, func(*safetensors.Tensor) bool { return true }),
			posIDs("embeddings.position_ids")), decoder("")...)},
		{"F64 storage", mapTensors(base, func(x *safetensors.Tensor) bool {
			v, err := x.Float32()
			if err != nil {
				panic(err)
			}
			x.DType, x.Data = "F64", nil
			for _, f := range v {
				x.Data = binary.LittleEndian.AppendUint64(x.Data, math.Float64bits(float64(f)))
			}
			return true
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, p := loadOutputs(t, writeCheckpoint(t, tc.tensors))
			assert.Equal(t, wantH, h)
			assert.Equal(t, wantP, p)
		})
	}
}

func TestCheckpointErrors(t *testing.T) {
	base := tinyTensors(t)
	drop := func(name string) []safetensors.Tensor {
		return mapTensors(base, func(x *safetensors.Tensor) bool { return x.Name != name })
	}
	tests := []struct {
		name    string
		tensors []safetensors.Tensor
		want    []string // substrings of the message
	}{
		{"missing tensor", drop("bert.encoder.layer.1.attention.self.key.bias"),
			[]string{`"bert.encoder.layer.1.attention.self.key.bias"`, "missing"}},
		{"missing LayerNorm (neither weight nor gamma)", drop("bert.encoder.layer.0.output.LayerNorm.weight"),
			[]string{`"bert.encoder.layer.0.output.LayerNorm.weight"`, "missing"}},
		{"missing pooler", drop("bert.pooler.dense.weight"), []string{`"bert.pooler.dense.weight"`}},
		{"wrong shape", mapTensors(base, func(x *safetensors.Tensor) bool {
			if x.Name == "bert.encoder.layer.0.intermediate.dense.weight" {
				x.Shape = []int{32, 37} // transposed
			}
			return true
		}), []string{`"bert.encoder.layer.0.intermediate.dense.weight"`, "[32 37]", "[37 32]"}},
		{"wrong vocabulary", mapTensors(base, func(x *safetensors.Tensor) bool {
			if x.Name == "bert.embeddings.word_embeddings.weight" {
				x.Shape = []int{33, 96}
			}
			return true
		}), []string{`"bert.embeddings.word_embeddings.weight"`, "shape"}},
		{"extra layer", append(mapTensors(base, func(*safetensors.Tensor) bool { return true }),
			f32Tensor("bert.encoder.layer.2.attention.self.query.bias", make([]float32, 32), 32)),
			[]string{`"bert.encoder.layer.2.attention.self.query.bias"`, "not used"}},
		{"extra embedding tensor", append(mapTensors(base, func(*safetensors.Tensor) bool { return true }),
			f32Tensor("bert.embeddings.extra", make([]float32, 2), 2)),
			[]string{`"bert.embeddings.extra"`, "not used"}},
		{"no word embeddings", drop("bert.embeddings.word_embeddings.weight"),
			[]string{"not a BERT checkpoint", "embeddings.word_embeddings.weight"}},
		{"not a BERT checkpoint at all", []safetensors.Tensor{f32Tensor("model.embed_tokens.weight", []float32{1}, 1, 1)},
			[]string{"not a BERT checkpoint"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeCheckpoint(t, tc.tensors)
			be := cpu.New()
			err := func() error {
				ck, err := bert.OpenCheckpoint(path)
				if err != nil {
					return err
				}
				m, err := bert.Load(be, tinyCfg(), ck, nn.F32)
				if err == nil {
					require.NoError(t, m.Close())
				}
				return err
			}()
			require.Error(t, err)
			assert.ErrorIs(t, err, nn.ErrWeights)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Contains(t, err.Error(), path, "the message names the file")
			assert.Zero(t, be.MemStats().CurrentBytes, "a failed Load frees what it uploaded")
		})
	}
}

func TestCheckpointNotSafetensors(t *testing.T) {
	path := writeCheckpoint(t, nil)
	require.NoError(t, os.WriteFile(path, []byte("not a safetensors file"), 0o644))
	_, err := bert.OpenCheckpoint(path)
	require.Error(t, err)
	assert.ErrorIs(t, err, safetensors.ErrInvalid)
	_, err = bert.OpenCheckpoint(path + ".missing")
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+".missing")
}

func TestCheckpointRejectsIntegerWeights(t *testing.T) {
	tensors := mapTensors(tinyTensors(t), func(x *safetensors.Tensor) bool {
		if x.Name == "bert.embeddings.LayerNorm.bias" {
			x.DType = "I32" // same size
		}
		return true
	})
	ck, err := bert.OpenCheckpoint(writeCheckpoint(t, tensors))
	require.NoError(t, err)
	_, err = ck.Values(nn.Param{Name: "embeddings.LayerNorm.bias", Shape: []int{32}})
	require.ErrorIs(t, err, nn.ErrWeights)
	assert.ErrorContains(t, err, `"bert.embeddings.LayerNorm.bias" has dtype I32`)
}

func TestLoadRejectsBadConfigAndPrecision(t *testing.T) {
	bad := tinyCfg()
	bad.NumAttentionHeads = 5
	_, err := bert.Load(cpu.New(), bad, bert.Synthetic(1), nn.F32)
	assert.ErrorIs(t, err, bert.ErrConfig)
	for _, p := range []nn.Precision{0, nn.Mixed + 1} {
		_, err = bert.Load(cpu.New(), tinyCfg(), bert.Synthetic(1), p)
		assert.Error(t, err, "precision %v", p)
	}
}

func TestModelCloseFreesEverything(t *testing.T) {
	be := cpu.New()
	m, err := bert.Load(be, tinyCfg(), bert.Synthetic(3), nn.F32)
	require.NoError(t, err)
	f, err := m.NewForward(2, 7)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, m.Close())
	assert.Zero(t, be.MemStats().CurrentBytes)
}

// FuzzCheckpoint mutates the bytes of the tiny checkpoint: the result is a
// safetensors error, a BERT weights error, or a model that runs.
//
// The fuzz input is an edit of the file rather than the file itself: at
// offset off (taken modulo the header's size when mode&4 is set, so that
// the JSON header gets its share), patch overwrites (mode%3 == 0), is
// inserted (1), or that many bytes are deleted (2); then the file is cut
// to keep bytes if keep is not 0. Fuzzing the 89 KB file directly spends
// nearly all its time minimising each new input (about a minute apiece
// with the default -fuzzminimizetime); an edit is a few bytes. The seed
// corpus is the file itself and a truncated copy, plus header edits.
func FuzzCheckpoint(f *testing.F) {
	data, err := os.ReadFile(tinyModel)
	require.NoError(f, err)
	headerEnd := 8 + int(binary.LittleEndian.Uint64(data))
	at := func(s string) uint32 { return uint32(bytes.Index(data, []byte(s))) }
	f.Add(uint32(0), uint8(0), []byte(nil), uint32(0))                             // the file itself
	f.Add(uint32(0), uint8(0), []byte(nil), uint32(len(data)/2))                   // truncated
	f.Add(uint32(0), uint8(0), []byte(nil), uint32(headerEnd-3))                   // truncated in the header
	f.Add(at("layer.1.output.dense.bias"), uint8(0), []byte("layer.2"), uint32(0)) // an extra layer
	f.Add(at("[37,32]"), uint8(0), []byte("[32,37]"), uint32(0))                   // a transposed shape
	f.Add(at(`"F32"`), uint8(0), []byte(`"F16"`), uint32(0))                       // a dtype of the wrong size
	f.Add(at("word_embeddings"), uint8(2), []byte("word"), uint32(0))              // no word embeddings
	f.Add(at("LayerNorm.weight"), uint8(0), []byte("LayerNorm.gamma"), uint32(0))
	f.Add(uint32(headerEnd+100), uint8(0), []byte{0, 0, 0xc0, 0x7f}, uint32(0)) // a NaN weight
	be := cpu.New()
	f.Fuzz(func(t *testing.T, off uint32, mode uint8, patch []byte, keep uint32) {
		b := slices.Clone(data)
		o := int(off) % (len(b) + 1)
		if mode&4 != 0 {
			o = int(off) % headerEnd
		}
		switch mode % 3 {
		case 0:
			copy(b[o:], patch)
		case 1:
			b = slices.Insert(b, o, patch...)
		case 2:
			b = slices.Delete(b, o, min(len(b), o+len(patch)))
		}
		if keep != 0 && int(keep) < len(b) {
			b = b[:keep]
		}
		file, err := safetensors.Read(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		ck, err := bert.NewCheckpoint(file)
		if err != nil {
			if !errors.Is(err, nn.ErrWeights) {
				t.Fatalf("NewCheckpoint error does not wrap ErrWeights: %v", err)
			}
			return
		}
		m, err := bert.Load(be, tinyCfg(), ck, nn.F32)
		if err != nil {
			if !errors.Is(err, nn.ErrWeights) && !errors.Is(err, safetensors.ErrConvert) && !errors.Is(err, safetensors.ErrInvalid) {
				t.Fatalf("Load error wraps neither ErrWeights nor a safetensors error: %v", err)
			}
			if be.MemStats().CurrentBytes != 0 {
				t.Fatalf("a failed Load leaves %d bytes allocated", be.MemStats().CurrentBytes)
			}
			return
		}
		fw, err := m.NewForward(1, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := fw.SetInputs(bert.Inputs{IDs: []int32{1, 2, 3}}); err != nil {
			t.Fatal(err)
		}
		if err := fw.Run(); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(fw.Close(), m.Close()); err != nil {
			t.Fatal(err)
		}
	})
}
