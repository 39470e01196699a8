package safetensors_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
)

// raw assembles a file from a header and a data section, with the header
// length computed.
func raw(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// withLength assembles a file whose header-length field is n whatever the
// header holds.
func withLength(n uint64, rest string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
}

func read(b []byte) (*safetensors.File, error) {
	return safetensors.Read(bytes.NewReader(b), int64(len(b)))
}

func f32bytes(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// sampleTensors covers every byte-sized dtype class, a scalar, an empty
// tensor and names that JSON must escape.
func sampleTensors() []safetensors.Tensor {
	return []safetensors.Tensor{
		{Name: "w", DType: "F32", Shape: []int{2, 3}, Data: f32bytes(1, 2, 3, 4, 5, -6)},
		{Name: "h", DType: "F16", Shape: []int{3}, Data: []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x00}},
		{Name: "b", DType: "BF16", Shape: []int{1, 2}, Data: []byte{0x80, 0x3f, 0x40, 0xc0}},
		{Name: "ids", DType: "I32", Shape: []int{4}, Data: []byte{1, 0, 0, 0, 255, 255, 255, 255, 7, 0, 0, 0, 0, 0, 0, 0}},
		{Name: "big", DType: "I64", Shape: []int{1}, Data: []byte{9, 0, 0, 0, 0, 0, 0, 0}},
		{Name: "d", DType: "F64", Shape: []int{}, Data: binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.5))},
		{Name: "q", DType: "I8", Shape: []int{3}, Data: []byte{1, 0xff, 0x80}},
		{Name: "u", DType: "U8", Shape: []int{2}, Data: []byte{200, 3}},
		{Name: "e4", DType: "F8_E4M3", Shape: []int{2}, Data: []byte{0x38, 0xb8}},
		{Name: "e5", DType: "F8_E5M2", Shape: []int{2}, Data: []byte{0x3c, 0x7c}},
		{Name: "empty", DType: "F32", Shape: []int{0, 3}, Data: []byte{}},
		{Name: "layer.0/<attn> \"x\" é", DType: "BOOL", Shape: []int{1}, Data: []byte{1}},
		{Name: "nib", DType: "F4", Shape: []int{2}, Data: []byte{0x21}},
	}
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		tensors  []safetensors.Tensor
		metadata map[string]string
	}{
		{"empty", nil, nil},
		{"metadata only", nil, map[string]string{"format": "pt", "note": "<&>"}},
		{"one tensor", sampleTensors()[:1], nil},
		{"all dtypes", sampleTensors(), map[string]string{"seed": "1", "": "empty key"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, safetensors.Write(&buf, tc.tensors, tc.metadata))
			b := buf.Bytes()
			n := binary.LittleEndian.Uint64(b)
			assert.Zero(t, n%8, "header length %d is not a multiple of 8", n)

			var header map[string]struct {
				DataOffsets [2]int64 `json:"data_offsets"`
			}
			require.NoError(t, json.Unmarshal(b[8:8+n], &header))

			f, err := read(b)
			require.NoError(t, err)
			var names []string
			for _, want := range tc.tensors {
				names = append(names, want.Name)
				got, err := f.Tensor(want.Name)
				require.NoError(t, err)
				assert.Equal(t, want.DType, got.DType)
				assert.Equal(t, want.Shape, got.Shape)
				assert.Equal(t, want.Data, got.Data)
				bits, ok := safetensors.DTypeBits(got.DType)
				require.True(t, ok)
				if bits >= 8 {
					off := 8 + int64(n) + header[want.Name].DataOffsets[0]
					assert.Zero(t, off%int64(bits/8), "tensor %q data at %d is not aligned", want.Name, off)
				}
			}
			assert.ElementsMatch(t, names, f.Tensors())
			assert.IsIncreasing(t, f.Tensors())
			want := tc.metadata
			if want == nil {
				want = map[string]string{}
			}
			assert.Equal(t, want, f.Metadata())
		})
	}
}

// TestWriteMatchesReference checks byte for byte the outputs of the
// reference implementation's own serialization tests.
func TestWriteMatchesReference(t *testing.T) {
	data := f32bytes(0, 1, 2, 3, 4, 5)
	tests := []struct {
		name     string
		tensors  []safetensors.Tensor
		metadata map[string]string
		header   string
		data     []byte
	}{
		{"empty", nil, nil, "{}      ", nil},
		{"metadata", nil, map[string]string{"framework": "pt"}, `{"__metadata__":{"framework":"pt"}}     `, nil},
		{
			"aligned", []safetensors.Tensor{{Name: "attn.0", DType: "F32", Shape: []int{1, 2, 3}, Data: data}}, nil,
			`{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}`, data,
		},
		{
			"padded", []safetensors.Tensor{{Name: "attn0", DType: "F32", Shape: []int{1, 1, 2, 3}, Data: data}}, nil,
			`{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       `, data,
		},
		{
			"order", []safetensors.Tensor{
				{Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{7}},
				{Name: "c", DType: "F32", Shape: []int{1}, Data: f32bytes(1)},
				{Name: "b", DType: "F32", Shape: []int{1}, Data: f32bytes(2)},
			}, nil,
			`{"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"c":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"a":{"dtype":"U8","shape":[1],"data_offsets":[8,9]}} `,
			append(append(f32bytes(2), f32bytes(1)...), 7),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, safetensors.Write(&buf, tc.tensors, tc.metadata))
			assert.Equal(t, raw(tc.header, tc.data), buf.Bytes())
		})
	}
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name    string
		tensors []safetensors.Tensor
		want    string
	}{
		{"duplicate", []safetensors.Tensor{{Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{1}}, {Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{2}}}, `tensor "a": duplicate name`},
		{"reserved", []safetensors.Tensor{{Name: "__metadata__", DType: "U8", Shape: []int{1}, Data: []byte{1}}}, "reserved"},
		{"unknown dtype", []safetensors.Tensor{{Name: "a", DType: "F31", Shape: []int{1}, Data: []byte{1}}}, `tensor "a": unknown dtype "F31"`},
		{"size", []safetensors.Tensor{{Name: "a", DType: "F32", Shape: []int{2}, Data: []byte{1}}}, `tensor "a": 1 bytes of data but shape [2] of F32 needs 8`},
		{"negative", []safetensors.Tensor{{Name: "a", DType: "F32", Shape: []int{-1}, Data: nil}}, `tensor "a": dimension 0 of shape [-1] is negative`},
		{"utf8", []safetensors.Tensor{{Name: "a\xff", DType: "U8", Shape: []int{1}, Data: []byte{1}}}, "not valid UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := safetensors.Write(&buf, tc.tensors, nil)
			require.ErrorIs(t, err, safetensors.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
			assert.Zero(t, buf.Len(), "nothing is written on error")
		})
	}
}

// corruption is a malformed file and what its error must say.
type corruption struct {
	name string
	data []byte
	want []string // substrings of the error
}

func corruptions() []corruption {
	const a4 = `"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}`
	four := []byte{1, 2, 3, 4}
	return []corruption{
		{"empty file", nil, []string{"truncated", "0 bytes"}},
		{"short length", []byte{1, 2, 3}, []string{"truncated"}},
		{"header longer than file", withLength(100, "{}"), []string{"header length 100 is larger than the 2 bytes"}},
		{"header over limit", withLength(safetensors.MaxHeaderSize+1, "{}"), []string{"exceeds the limit"}},
		{"header length 2^64-1", withLength(math.MaxUint64, "{}"), []string{"exceeds the limit"}},
		{"invalid JSON", raw(`{"a":`, nil), []string{"invalid JSON header"}},
		{"trailing comma", raw(`{`+a4+`,}`, four), []string{"invalid JSON header"}},
		{"not an object", raw(`[1, 2]`, nil), []string{"does not start with '{'"}},
		{"leading space", raw(` {}`, nil), []string{"does not start with '{'"}},
		{"invalid UTF-8", raw("{\"\xff\":1}", nil), []string{"not valid UTF-8"}},
		{"trailing garbage", raw(`{} x`, nil), []string{"unexpected bytes after the object"}},
		{"NUL padding", raw("{}\x00\x00", nil), []string{"unexpected bytes after the object"}},
		{"unknown dtype", raw(`{"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}}`, four), []string{`tensor "a"`, `unknown dtype "F33"`}},
		{"dtype not a string", raw(`{"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}`, four), []string{`tensor "a"`, "dtype is 4, not a string"}},
		{"entry not an object", raw(`{"a":[1]}`, nil), []string{`tensor "a"`, "not an object"}},
		{"shape null", raw(`{"a":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}`, four), []string{`tensor "a"`, "shape is null"}},
		{"shape of floats", raw(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, four), []string{`tensor "a"`, "shape"}},
		{"negative dimension", raw(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, four), []string{`tensor "a"`, "dimension 0 of shape [-1] is negative"}},
		{"no dtype", raw(`{"a":{"shape":[1],"data_offsets":[0,4]}}`, four), []string{`tensor "a"`, "no dtype"}},
		{"no shape", raw(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, four), []string{`tensor "a"`, "no shape"}},
		{"no offsets", raw(`{"a":{"dtype":"F32","shape":[1]}}`, four), []string{`tensor "a"`, "no data_offsets"}},
		{"three offsets", raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, four), []string{`tensor "a"`, "data_offsets has 3 elements"}},
		{"reversed offsets", raw(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, four), []string{`tensor "a"`, "[4, 0] is not a valid range"}},
		{"negative offset", raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, four), []string{`tensor "a"`, "not a valid range"}},
		{"offsets past the end", raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, four), []string{`tensor "a"`, "[0, 8] out of range: the data section has 4 bytes"}},
		{"offsets not shape×dtype", raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, four), []string{`tensor "a"`, "span 4 bytes but shape [2] of F32 needs 8"}},
		{"shape overflow", raw(`{"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}}`, four), []string{`tensor "a"`, "too many elements"}},
		{"sub-byte remainder", raw(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, []byte{1, 2}), []string{`tensor "a"`, "does not fill whole bytes"}},
		{
			"overlap",
			raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 12)),
			[]string{`tensor "b"`, `overlap tensor "a" at [0, 8]`},
		},
		{
			"same range",
			raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, four),
			[]string{`tensor "b"`, `overlap tensor "a"`},
		},
		{
			"gap",
			raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)),
			[]string{`tensor "b"`, "leave bytes 4 to 8 of the data section unused"},
		},
		{"trailing data", raw(`{`+a4+`}`, make([]byte, 8)), []string{"data section has 8 bytes but the tensors cover only 4"}},
		{"no tensors but data", raw(`{}`, four), []string{"data section has 4 bytes but the tensors cover only 0"}},
		{"duplicate name", raw(`{`+a4+`,`+a4+`}`, four), []string{`tensor "a"`, "duplicate tensor name"}},
		{"duplicate field", raw(`{"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}}`, four), []string{`tensor "a"`, `duplicate key "dtype"`}},
		{"duplicate metadata", raw(`{"__metadata__":{},"__metadata__":{}}`, nil), []string{"__metadata__ appears twice"}},
		{"duplicate metadata key", raw(`{"__metadata__":{"k":"1","k":"2"}}`, nil), []string{"__metadata__", `duplicate key "k"`}},
		{"metadata value not a string", raw(`{"__metadata__":{"k":1}}`, nil), []string{`__metadata__["k"] is 1, not a string`}},
		{"metadata not an object", raw(`{"__metadata__":"x"}`, nil), []string{"__metadata__ is not a JSON object"}},
	}
}

func TestReadErrors(t *testing.T) {
	for _, tc := range corruptions() {
		t.Run(tc.name, func(t *testing.T) {
			f, err := read(tc.data)
			require.Error(t, err)
			assert.Nil(t, f)
			assert.ErrorIs(t, err, safetensors.ErrInvalid)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestReadTruncatedReader(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, sampleTensors(), nil))
	b := buf.Bytes()
	// The caller claims the full size but the reader ends early.
	_, err := safetensors.Read(bytes.NewReader(b[:len(b)-3]), int64(len(b)))
	require.ErrorIs(t, err, safetensors.ErrInvalid)
	assert.Contains(t, err.Error(), "truncated: data section")
	// Cutting the file itself leaves the tensors short of the data.
	_, err = read(b[:len(b)-3])
	require.ErrorIs(t, err, safetensors.ErrInvalid)
	assert.Contains(t, err.Error(), "out of range")
}

type failingReader struct{}

func (failingReader) ReadAt([]byte, int64) (int, error) { return 0, errors.New("disk on fire") }

func TestReadIOError(t *testing.T) {
	_, err := safetensors.Read(failingReader{}, 100)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk on fire")
	assert.NotErrorIs(t, err, safetensors.ErrInvalid)
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, sampleTensors()[:2], map[string]string{"k": "v"}))
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))

	f, err := safetensors.Open(path)
	require.NoError(t, err)
	assert.Equal(t, path, f.Name())
	assert.Equal(t, []string{"h", "w"}, f.Tensors())
	assert.Equal(t, map[string]string{"k": "v"}, f.Metadata())

	_, err = f.Tensor("x")
	require.ErrorIs(t, err, safetensors.ErrNotFound)
	assert.Contains(t, err.Error(), `tensor "x" not in file "`+path+`"`)

	// Returned slices are the caller's to modify.
	f.Tensors()[0] = "zzz"
	f.Metadata()["k"] = "changed"
	w, err := f.Tensor("w")
	require.NoError(t, err)
	w.Shape[0] = 99
	assert.Equal(t, []string{"h", "w"}, f.Tensors())
	assert.Equal(t, "v", f.Metadata()["k"])
	w, err = f.Tensor("w")
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, w.Shape)

	bad := filepath.Join(dir, "bad.safetensors")
	require.NoError(t, os.WriteFile(bad, raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, []byte{1, 2, 3, 4}), 0o644))
	_, err = safetensors.Open(bad)
	require.ErrorIs(t, err, safetensors.ErrInvalid)
	assert.Contains(t, err.Error(), `file "`+bad+`": tensor "a": data_offsets [0, 4] span 4 bytes`)

	_, err = safetensors.Open(filepath.Join(dir, "missing.safetensors"))
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "missing.safetensors")

	_, err = read(buf.Bytes())
	require.NoError(t, err)
	mem, err := read(buf.Bytes())
	require.NoError(t, err)
	_, err = mem.Tensor("x")
	assert.Contains(t, err.Error(), `tensor "x" not in the safetensors data`)
}

func TestFloat32(t *testing.T) {
	tests := []struct {
		name string
		want []float32
	}{
		{"w", []float32{1, 2, 3, 4, 5, -6}},
		{"h", []float32{1, -2, 0}},
		{"b", []float32{1, -3}},
		{"ids", []float32{1, -1, 7, 0}},
		{"big", []float32{9}},
		{"d", []float32{0.5}},
		{"q", []float32{1, -1, -128}},
		{"u", []float32{200, 3}},
		{"e4", []float32{1, -1}},
		{"e5", []float32{1, float32(math.Inf(1))}},
		{"empty", []float32{}},
	}
	byName := map[string]safetensors.Tensor{}
	for _, tt := range sampleTensors() {
		byName[tt.Name] = tt
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := byName[tc.name].Float32()
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	_, err := byName["nib"].Float32()
	require.ErrorIs(t, err, safetensors.ErrConvert)
	assert.Contains(t, err.Error(), `tensor "nib": cannot decode F4 as float32`)

	bad := safetensors.Tensor{Name: "short", DType: "F32", Shape: []int{3}, Data: make([]byte, 8)}
	_, err = bad.Float32()
	require.ErrorIs(t, err, safetensors.ErrInvalid)
	assert.Contains(t, err.Error(), `tensor "short": 8 bytes of data but shape [3] of F32 needs 12`)
}

func TestInt32(t *testing.T) {
	byName := map[string]safetensors.Tensor{}
	for _, tt := range sampleTensors() {
		byName[tt.Name] = tt
	}
	got, err := byName["ids"].Int32()
	require.NoError(t, err)
	assert.Equal(t, []int32{1, -1, 7, 0}, got)
	got, err = byName["big"].Int32()
	require.NoError(t, err)
	assert.Equal(t, []int32{9}, got)
	got, err = byName["q"].Int32()
	require.NoError(t, err)
	assert.Equal(t, []int32{1, -1, -128}, got)

	huge := safetensors.Tensor{Name: "huge", DType: "I64", Shape: []int{2}, Data: binary.LittleEndian.AppendUint64(make([]byte, 8), 1<<40)}
	_, err = huge.Int32()
	require.ErrorIs(t, err, safetensors.ErrConvert)
	assert.Contains(t, err.Error(), `tensor "huge": element 1 = 1099511627776 does not fit in int32`)

	_, err = byName["w"].Int32()
	require.ErrorIs(t, err, safetensors.ErrConvert)
	assert.Contains(t, err.Error(), "cannot decode F32 as int32")
}

func TestKernelDType(t *testing.T) {
	for name, want := range map[string]kernels.DType{
		"F32": kernels.F32, "F16": kernels.F16, "BF16": kernels.BF16, "I8": kernels.I8,
		"F8_E4M3": kernels.E4M3, "F8_E5M2": kernels.E5M2, "I32": kernels.I32,
	} {
		got, err := safetensors.Tensor{Name: "t", DType: name}.KernelDType()
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
		back, err := safetensors.DTypeName(got)
		require.NoError(t, err)
		assert.Equal(t, name, back)
	}
	_, err := safetensors.Tensor{Name: "t", DType: "F64"}.KernelDType()
	require.ErrorIs(t, err, safetensors.ErrConvert)
	assert.True(t, strings.Contains(err.Error(), `tensor "t": dtype F64 has no kernels dtype`), err.Error())
	_, err = safetensors.DTypeName(kernels.Invalid)
	require.ErrorIs(t, err, safetensors.ErrConvert)
}
