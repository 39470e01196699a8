// Package gguf reads and writes GGUF files, llama.cpp's single-file model
// format: a header, typed metadata (hyperparameters, the tokenizer) and
// tensors in ggml's float and block-quantized types.
//
// The format (version 3, little-endian; version 2 is the same layout):
//
//	magic "GGUF", version u32, tensor count u64, metadata count u64
//	metadata: key (string), value type u32, value
//	tensor infos: name (string), n_dims u32, ne[n_dims] u64 (innermost
//	  first), ggml type u32, offset u64 (from the data section's start)
//	padding to general.alignment (u32, default 32), then the data section
//
// Strings are a u64 byte length and UTF-8 bytes; an array is its element
// type u32, a u64 count and the elements. Tensor data are row-major rows of
// ne[0] values, each row a run of the type's blocks.
//
// Parse validates everything it reads; a malformed file gives one error
// naming the file, the key or tensor, and what is wrong, wrapping
// ErrInvalid (or ErrUnsupported for a well-formed file this package does
// not read). Llama-family models are mapped onto models/llama in llama.go.
package gguf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"unicode/utf8"
)

// Errors wrapped by this package's errors, for errors.Is.
var (
	// ErrInvalid marks a malformed GGUF file.
	ErrInvalid = errors.New("invalid GGUF file")
	// ErrUnsupported marks a well-formed file, key or tensor type this
	// package does not implement.
	ErrUnsupported = errors.New("unsupported GGUF content")
	// ErrMissing marks a required metadata key or tensor that is absent.
	ErrMissing = errors.New("missing from the GGUF file")
)

// Magic is the first four bytes of a GGUF file.
const Magic = "GGUF"

// Version is the format version this package writes.
const Version = 3

// DefaultAlignment is the data alignment of a file without
// general.alignment.
const DefaultAlignment = 32

// KeyAlignment is the metadata key of the data alignment.
const KeyAlignment = "general.alignment"

// maxDims is ggml's GGML_MAX_DIMS.
const maxDims = 4

// A KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// Tensor describes one tensor of a file.
type Tensor struct {
	Name string
	// Dims are ggml's ne, innermost (the row length) first.
	Dims []int
	Type Type
	// Offset is the data's start relative to the data section; Size its
	// length in bytes.
	Offset, Size int64
}

// Shape is the tensor's row-major shape, outermost first (Dims
// reversed): a weight of ne [in, out] has shape [out, in], as PyTorch
// stores nn.Linear's.
func (t Tensor) Shape() []int {
	s := slices.Clone(t.Dims)
	slices.Reverse(s)
	return s
}

// Len is the number of elements.
func (t Tensor) Len() int {
	n := 1
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file: its metadata and tensor infos, with the
// tensor data in memory (mapped from the file by Open).
type File struct {
	name      string
	version   uint32
	alignment int
	kvs       []KV
	kvIndex   map[string]int
	tensors   []Tensor
	tIndex    map[string]int
	data      []byte // the data section
	unmap     func() error
}

// Name is the file's path (or the name Parse was given), for messages.
func (f *File) Name() string { return f.name }

// Version is the file's format version.
func (f *File) Version() uint32 { return f.version }

// Alignment is the data alignment: general.alignment or the default.
func (f *File) Alignment() int { return f.alignment }

// Metadata returns the metadata entries in file order.
func (f *File) Metadata() []KV { return slices.Clone(f.kvs) }

// Value returns the value of key and whether it is present.
func (f *File) Value(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.kvs[i].Value, true
}

// Tensors returns the tensor infos in file order.
func (f *File) Tensors() []Tensor { return slices.Clone(f.tensors) }

// Tensor returns the named tensor's info and whether it is present.
func (f *File) Tensor(name string) (Tensor, bool) {
	i, ok := f.tIndex[name]
	if !ok {
		return Tensor{}, false
	}
	return f.tensors[i], true
}

// Data returns the bytes of tensor t, which must be one of the file's.
func (f *File) Data(t Tensor) []byte { return f.data[t.Offset : t.Offset+t.Size] }

// Close releases the file's memory mapping, if any; the File's data must
// not be used afterwards.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	u := f.unmap
	f.unmap, f.data = nil, nil
	return u()
}

// errorf returns an error naming the file and wrapping ErrInvalid unless
// the arguments wrap another error.
func (f *File) errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrMissing) && !errors.Is(err, ErrInvalid) {
		err = fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	return fmt.Errorf("gguf: %s: %w", f.name, err)
}

// Open reads the GGUF file at path, mapping it into memory where the
// system allows.
func Open(path string) (*File, error) {
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := Parse(path, data)
	if err != nil {
		return nil, errors.Join(err, unmap())
	}
	f.unmap = unmap
	return f, nil
}

// mapFileFallback reads the whole file, where mapping is not available.
func mapFileFallback(path string) ([]byte, func() error, error) {
	b, err := os.ReadFile(path)
	return b, func() error { return nil }, err
}

// Parse reads a GGUF file from its bytes; name is used in messages. The
// File keeps data.
func Parse(name string, data []byte) (*File, error) {
	f := &File{name: name, kvIndex: map[string]int{}, tIndex: map[string]int{}, alignment: DefaultAlignment}
	r := &reader{b: data}
	if len(data) < 4 || string(data[:4]) != Magic {
		return nil, f.errorf("bad magic %q, want %q (not a GGUF file)", data[:min(4, len(data))], Magic)
	}
	r.off = 4
	var err error
	if f.version, err = r.u32("version"); err != nil {
		return nil, f.errorf("%w", err)
	}
	if f.version != 2 && f.version != 3 {
		return nil, f.errorf("version %d: only versions 2 and 3 are read: %w", f.version, ErrUnsupported)
	}
	nt, err := r.u64("tensor count")
	if err != nil {
		return nil, f.errorf("%w", err)
	}
	nkv, err := r.u64("metadata count")
	if err != nil {
		return nil, f.errorf("%w", err)
	}
	// Every entry takes at least 12 bytes (an empty key and a type), every
	// tensor info at least 24: larger counts are truncated files.
	if nkv > uint64(r.left()/12) {
		return nil, f.errorf("metadata count %d exceeds what the file's %d bytes can hold (truncated?)", nkv, len(data))
	}
	if nt > uint64(r.left()/24) {
		return nil, f.errorf("tensor count %d exceeds what the file's %d bytes can hold (truncated?)", nt, len(data))
	}
	for i := range int(nkv) {
		key, err := r.str(fmt.Sprintf("metadata entry %d's key", i))
		if err != nil {
			return nil, f.errorf("%w", err)
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, f.errorf("metadata key %q appears twice", key)
		}
		v, err := r.value(key, 0)
		if err != nil {
			return nil, f.errorf("%w", err)
		}
		f.kvIndex[key] = len(f.kvs)
		f.kvs = append(f.kvs, KV{key, v})
	}
	if v, ok := f.Value(KeyAlignment); ok {
		a, isU32 := v.scalar.(uint32)
		if !isU32 {
			return nil, f.errorf("metadata %s has type %s, want uint32", KeyAlignment, v.Type)
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, f.errorf("metadata %s = %d, want a power of two", KeyAlignment, a)
		}
		f.alignment = int(a)
	}
	for i := range int(nt) {
		t, err := r.tensorInfo(i)
		if err != nil {
			return nil, f.errorf("%w", err)
		}
		if _, dup := f.tIndex[t.Name]; dup {
			return nil, f.errorf("tensor %q appears twice", t.Name)
		}
		if t.Offset%int64(f.alignment) != 0 {
			return nil, f.errorf("tensor %q: offset %d is not a multiple of the alignment %d", t.Name, t.Offset, f.alignment)
		}
		f.tIndex[t.Name] = len(f.tensors)
		f.tensors = append(f.tensors, t)
	}
	start := alignUp(int64(r.off), int64(f.alignment))
	if start > int64(len(data)) {
		if len(f.tensors) > 0 {
			return nil, f.errorf("the data section would start at byte %d, past the end of the file (%d bytes, truncated?)", start, len(data))
		}
		start = int64(len(data))
	}
	f.data = data[start:]
	if err := f.checkLayout(); err != nil {
		return nil, err
	}
	return f, nil
}

// checkLayout checks that every tensor's data lies inside the data
// section and that no two overlap.
func (f *File) checkLayout() error {
	order := make([]int, len(f.tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(f.tensors[a].Offset, f.tensors[b].Offset) })
	var end int64
	var prev string
	for _, i := range order {
		t := f.tensors[i]
		if t.Size > int64(len(f.data)) || t.Offset > int64(len(f.data))-t.Size {
			return f.errorf("tensor %q: data [%d, %d) runs past the data section's %d bytes (truncated?)", t.Name, t.Offset, t.Offset+t.Size, len(f.data))
		}
		if t.Offset < end {
			return f.errorf("tensor %q: data at offset %d overlaps tensor %q, which ends at %d", t.Name, t.Offset, prev, end)
		}
		if t.Size > 0 {
			end, prev = t.Offset+t.Size, t.Name
		}
	}
	return nil
}

// alignUp rounds n up to a multiple of a (a power of two).
func alignUp(n, a int64) int64 { return (n + a - 1) &^ (a - 1) }

// reader reads the little-endian fields of a file's header.
type reader struct {
	b   []byte
	off int
}

func (r *reader) left() int { return len(r.b) - r.off }

// take returns the next n bytes, or an error naming what was being read.
func (r *reader) take(n uint64, what string) ([]byte, error) {
	if n > uint64(r.left()) {
		return nil, fmt.Errorf("%s at byte %d: needs %d bytes, %d left (truncated file?)", what, r.off, n, r.left())
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *reader) u32(what string) (uint32, error) {
	b, err := r.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64(what string) (uint64, error) {
	b, err := r.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a string, which must be valid UTF-8.
func (r *reader) str(what string) (string, error) {
	n, err := r.u64(what + " length")
	if err != nil {
		return "", err
	}
	b, err := r.take(n, what)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%s at byte %d is not valid UTF-8", what, r.off-len(b))
	}
	return string(b), nil
}

// maxNesting bounds arrays of arrays.
const maxNesting = 8

// value reads a value of key: its type, then the value.
func (r *reader) value(key string, depth int) (Value, error) {
	t, err := r.u32("metadata " + key + "'s type")
	if err != nil {
		return Value{}, err
	}
	return r.typed(key, ValueType(t), depth)
}

// typed reads a value of type t.
func (r *reader) typed(key string, t ValueType, depth int) (Value, error) {
	what := "metadata " + key
	if size, ok := t.size(); ok {
		b, err := r.take(uint64(size), what)
		if err != nil {
			return Value{}, err
		}
		return scalarValue(t, b, key)
	}
	switch t {
	case TypeString:
		s, err := r.str(what)
		return Value{Type: t, scalar: s}, err
	case TypeArray:
		if depth >= maxNesting {
			return Value{}, fmt.Errorf("%s: arrays nested deeper than %d", what, maxNesting)
		}
		et, err := r.u32(what + "'s element type")
		if err != nil {
			return Value{}, err
		}
		n, err := r.u64(what + "'s length")
		if err != nil {
			return Value{}, err
		}
		return r.array(key, ValueType(et), n, depth)
	}
	return Value{}, fmt.Errorf("%s: unknown value type %d", what, uint32(t))
}

// array reads n elements of type et.
func (r *reader) array(key string, et ValueType, n uint64, depth int) (Value, error) {
	what := "metadata " + key
	least := 8 // a string's length, an array's type and length and more
	if size, ok := et.size(); ok {
		least = size
	} else if et != TypeString && et != TypeArray {
		return Value{}, fmt.Errorf("%s: unknown array element type %d", what, uint32(et))
	}
	if n > uint64(r.left()/least) {
		return Value{}, fmt.Errorf("%s: %d elements of %s need more than the %d bytes left (truncated file?)", what, n, et, r.left())
	}
	v := Value{Type: TypeArray, Elem: et}
	if size, ok := et.size(); ok {
		b, _ := r.take(n*uint64(size), what)
		items, err := scalarArray(et, b, key)
		if err != nil {
			return Value{}, err
		}
		v.scalar = items
		return v, nil
	}
	switch et {
	case TypeString:
		s := make([]string, n)
		for i := range s {
			var err error
			if s[i], err = r.str(fmt.Sprintf("%s[%d]", what, i)); err != nil {
				return Value{}, err
			}
		}
		v.scalar = s
	default:
		a := make([]Value, n)
		for i := range a {
			var err error
			if a[i], err = r.typed(fmt.Sprintf("%s[%d]", key, i), TypeArray, depth+1); err != nil {
				return Value{}, err
			}
		}
		v.scalar = a
	}
	return v, nil
}

// tensorInfo reads tensor info i.
func (r *reader) tensorInfo(i int) (Tensor, error) {
	name, err := r.str(fmt.Sprintf("tensor %d's name", i))
	if err != nil {
		return Tensor{}, err
	}
	what := fmt.Sprintf("tensor %q", name)
	nd, err := r.u32(what + "'s n_dims")
	if err != nil {
		return Tensor{}, err
	}
	if nd == 0 || nd > maxDims {
		return Tensor{}, fmt.Errorf("%s: n_dims %d, want 1 to %d", what, nd, maxDims)
	}
	t := Tensor{Name: name, Dims: make([]int, nd)}
	n := uint64(1)
	for j := range t.Dims {
		d, err := r.u64(fmt.Sprintf("%s's ne[%d]", what, j))
		if err != nil {
			return Tensor{}, err
		}
		hi, lo := bits.Mul64(n, d)
		if d == 0 || hi != 0 || lo > math.MaxInt64/8 {
			return Tensor{}, fmt.Errorf("%s: ne[%d] = %d: dimensions must be positive and their product must fit", what, j, d)
		}
		n = lo
		t.Dims[j] = int(d)
	}
	typ, err := r.u32(what + "'s type")
	if err != nil {
		return Tensor{}, err
	}
	t.Type = Type(typ)
	info, ok := t.Type.info()
	if !ok {
		return Tensor{}, fmt.Errorf("%s: unknown ggml type %d", what, typ)
	}
	if t.Dims[0]%info.block != 0 {
		return Tensor{}, fmt.Errorf("%s: rows of %d values are not a whole number of %s blocks of %d", what, t.Dims[0], t.Type, info.block)
	}
	t.Size = int64(n / uint64(info.block) * uint64(info.bytes))
	off, err := r.u64(what + "'s offset")
	if err != nil {
		return Tensor{}, err
	}
	if off > math.MaxInt64/2 {
		return Tensor{}, fmt.Errorf("%s: offset %d is out of range", what, off)
	}
	t.Offset = int64(off)
	return t, nil
}
