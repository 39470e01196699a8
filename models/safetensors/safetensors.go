// Package safetensors reads and writes the safetensors tensor file format
// (https://github.com/huggingface/safetensors):
//
//	8 bytes   N, the header length, a little-endian uint64
//	N bytes   a JSON object: for every tensor name
//	          {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//	          and optionally "__metadata__": {string: string}
//	rest      the data section; offsets are relative to its start
//
// Reading is strict, as in the reference implementation: the header must be
// valid UTF-8 JSON starting with '{', at most MaxHeaderSize bytes, without
// duplicate keys, and the tensors' byte ranges must match their shape and
// dtype and tile the data section exactly, with no overlap, gap or trailing
// bytes. Every error names the file (when opened by path), the tensor and
// what is wrong, and wraps ErrInvalid, ErrNotFound or ErrConvert.
//
// Write produces what the reference implementation does: compact JSON with
// "__metadata__" first, tensors ordered by decreasing dtype alignment then
// name (so that every tensor's data is aligned to its element size), and the
// header padded with spaces to a multiple of 8 bytes.
package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxHeaderSize is the largest header length accepted, as in the reference
// implementation; it bounds what a hostile file can make Read allocate
// before validation.
const MaxHeaderSize = 100_000_000

// metadataKey is the header key holding the free-form string metadata.
const metadataKey = "__metadata__"

// Errors wrapped by this package's errors, for errors.Is.
var (
	// ErrInvalid marks a malformed file or tensor.
	ErrInvalid = errors.New("invalid safetensors data")
	// ErrNotFound marks a request for a tensor the file does not hold.
	ErrNotFound = errors.New("no such tensor")
	// ErrConvert marks a dtype that cannot be decoded as asked.
	ErrConvert = errors.New("unsupported dtype conversion")
)

// Tensor is one named tensor: its safetensors dtype name ("F32", "BF16",
// ...), its dimensions (outermost first; empty for a scalar) and its
// little-endian, row-major bytes.
type Tensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
}

// File is a parsed safetensors file held in memory.
type File struct {
	name     string
	tensors  map[string]Tensor
	names    []string
	metadata map[string]string
}

// Name returns the path the file was opened from, or "" when it was read
// with Read.
func (f *File) Name() string { return f.name }

// Tensors returns the names of the file's tensors, sorted.
func (f *File) Tensors() []string { return slices.Clone(f.names) }

// Metadata returns a copy of the file's "__metadata__" map; it is empty, not
// nil, when the file has none.
func (f *File) Metadata() map[string]string {
	m := make(map[string]string, len(f.metadata))
	for k, v := range f.metadata {
		m[k] = v
	}
	return m
}

// Tensor returns the named tensor. Its Data shares the file's memory and
// must not be modified. A missing name gives an error wrapping ErrNotFound.
func (f *File) Tensor(name string) (Tensor, error) {
	t, ok := f.tensors[name]
	if !ok {
		where := "the safetensors data"
		if f.name != "" {
			where = fmt.Sprintf("file %q", f.name)
		}
		return Tensor{}, fmt.Errorf("safetensors: tensor %q not in %s: %w", name, where, ErrNotFound)
	}
	t.Shape = slices.Clone(t.Shape)
	return t, nil
}

// Open reads and validates the safetensors file at path. Errors name path.
func Open(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return parse(&parser{name: path, r: bytes.NewReader(b), size: int64(len(b)), mem: b})
}

// Read reads and validates safetensors data of size bytes from r. It reads
// the header first and allocates the data section only once the header has
// been validated against size.
func Read(r io.ReaderAt, size int64) (*File, error) {
	return parse(&parser{r: r, size: size})
}

// parser reads one file, building errors that name it.
type parser struct {
	name string
	r    io.ReaderAt
	size int64
	mem  []byte // the whole file, when it is already in memory (Open)
}

// errf returns an error wrapping ErrInvalid that names the file and, when
// not empty, the tensor.
func (p *parser) errf(tensor, format string, args ...any) error {
	prefix := "safetensors: "
	if p.name != "" {
		prefix += fmt.Sprintf("file %q: ", p.name)
	}
	if tensor != "" {
		prefix += fmt.Sprintf("tensor %q: ", tensor)
	}
	return fmt.Errorf("%s%s: %w", prefix, fmt.Sprintf(format, args...), ErrInvalid)
}

// readAt fills buf from offset off, reporting a short file as truncated.
func (p *parser) readAt(buf []byte, off int64, what string) error {
	n, err := p.r.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return p.errf("", "truncated: %s needs bytes %d to %d but only %d could be read",
			what, off, off+int64(len(buf)), off+int64(n))
	}
	prefix := "safetensors: "
	if p.name != "" {
		prefix += fmt.Sprintf("file %q: ", p.name)
	}
	return fmt.Errorf("%sread %s: %w", prefix, what, err)
}

// entry is a tensor's header record before its data is attached.
type entry struct {
	name       string
	dtype      string
	shape      []int
	begin, end int64
}

func parse(p *parser) (*File, error) {
	size := p.size
	if size < 8 {
		return nil, p.errf("", "truncated: %d bytes, shorter than the 8-byte header length", size)
	}
	var lenBuf [8]byte
	if err := p.readAt(lenBuf[:], 0, "header length"); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize {
		return nil, p.errf("", "header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	}
	if n > uint64(size-8) {
		return nil, p.errf("", "header length %d is larger than the %d bytes that follow it", n, size-8)
	}
	header := make([]byte, n)
	if err := p.readAt(header, 8, "header"); err != nil {
		return nil, err
	}
	entries, meta, err := p.parseHeader(header)
	if err != nil {
		return nil, err
	}
	dataStart := 8 + int64(n)
	dataLen := size - dataStart
	if err := p.checkLayout(entries, dataLen); err != nil {
		return nil, err
	}
	var data []byte
	if p.mem != nil {
		data = p.mem[dataStart:] // shared, not copied
	} else {
		data = make([]byte, dataLen)
		if err := p.readAt(data, dataStart, "data section"); err != nil {
			return nil, err
		}
	}
	f := &File{name: p.name, tensors: make(map[string]Tensor, len(entries)), metadata: meta}
	for _, e := range entries {
		f.tensors[e.name] = Tensor{Name: e.name, DType: e.dtype, Shape: e.shape, Data: data[e.begin:e.end:e.end]}
		f.names = append(f.names, e.name)
	}
	slices.Sort(f.names)
	return f, nil
}

// parseHeader decodes the JSON header.
func (p *parser) parseHeader(header []byte) ([]entry, map[string]string, error) {
	if !utf8.Valid(header) {
		return nil, nil, p.errf("", "header is not valid UTF-8")
	}
	if len(header) == 0 || header[0] != '{' {
		return nil, nil, p.errf("", "header does not start with '{'")
	}
	var (
		entries []entry
		meta    = map[string]string{}
	)
	end, err := eachMember(header, func(key string, val json.RawMessage) error {
		if key == metadataKey {
			return p.parseMetadata(val, meta)
		}
		e, err := p.parseEntry(key, val)
		if err != nil {
			return err
		}
		entries = append(entries, e)
		return nil
	})
	var dup duplicateKeyError
	switch {
	case err == nil:
	case errors.Is(err, ErrInvalid):
		return nil, nil, err
	case errors.As(err, &dup) && string(dup) == metadataKey:
		return nil, nil, p.errf("", "%s appears twice in the header", metadataKey)
	case errors.As(err, &dup):
		return nil, nil, p.errf(string(dup), "duplicate tensor name in the header")
	default:
		return nil, nil, p.errf("", "invalid JSON header: %v", err)
	}
	if rest := bytes.TrimLeft(header[end:], " \t\r\n"); len(rest) > 0 {
		return nil, nil, p.errf("", "invalid JSON header: %d unexpected bytes after the object", len(rest))
	}
	return entries, meta, nil
}

// parseMetadata decodes the "__metadata__" object, null meaning none.
func (p *parser) parseMetadata(val json.RawMessage, meta map[string]string) error {
	if string(val) == "null" {
		return nil
	}
	if val[0] != '{' {
		return p.errf("", "%s is not a JSON object of strings", metadataKey)
	}
	_, err := eachMember(val, func(key string, v json.RawMessage) error {
		if v[0] != '"' {
			return p.errf("", "%s[%q] is %s, not a string", metadataKey, key, abbreviate(v))
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return p.errf("", "%s[%q]: %v", metadataKey, key, err)
		}
		meta[key] = s
		return nil
	})
	if err != nil && !errors.Is(err, ErrInvalid) {
		return p.errf("", "%s: %v", metadataKey, err)
	}
	return err
}

// parseEntry decodes one tensor's record and checks it on its own: a known
// dtype, non-negative dimensions and offsets whose span matches them.
func (p *parser) parseEntry(name string, val json.RawMessage) (entry, error) {
	e := entry{name: name}
	if val[0] != '{' {
		return e, p.errf(name, "header entry is %s, not an object", abbreviate(val))
	}
	var have struct{ dtype, shape, offsets bool }
	var offsets []int64
	_, err := eachMember(val, func(key string, v json.RawMessage) error {
		var dst any
		switch key {
		case "dtype":
			have.dtype, dst = true, &e.dtype
			if v[0] != '"' {
				return p.errf(name, "dtype is %s, not a string", abbreviate(v))
			}
		case "shape":
			have.shape, dst = true, &e.shape
			if v[0] != '[' {
				return p.errf(name, "shape is %s, not an array", abbreviate(v))
			}
		case "data_offsets":
			have.offsets, dst = true, &offsets
			if v[0] != '[' {
				return p.errf(name, "data_offsets is %s, not an array", abbreviate(v))
			}
		default:
			return nil // unknown fields are ignored, as by the reference implementation
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return p.errf(name, "%s: %v", key, err)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			return e, err
		}
		return e, p.errf(name, "invalid JSON: %v", err)
	}
	switch {
	case !have.dtype:
		return e, p.errf(name, "no dtype")
	case !have.shape:
		return e, p.errf(name, "no shape")
	case !have.offsets:
		return e, p.errf(name, "no data_offsets")
	}
	if e.shape == nil {
		e.shape = []int{}
	}
	want, err := byteSize(e.dtype, e.shape)
	if err != nil {
		return e, p.errf(name, "%v", err)
	}
	if len(offsets) != 2 {
		return e, p.errf(name, "data_offsets has %d elements, want 2 (begin, end)", len(offsets))
	}
	e.begin, e.end = offsets[0], offsets[1]
	if e.begin < 0 || e.end < e.begin {
		return e, p.errf(name, "data_offsets [%d, %d] is not a valid range", e.begin, e.end)
	}
	if e.end-e.begin != want {
		return e, p.errf(name, "data_offsets [%d, %d] span %d bytes but shape %v of %s needs %d",
			e.begin, e.end, e.end-e.begin, e.shape, e.dtype, want)
	}
	return e, nil
}

// checkLayout verifies that the tensors' byte ranges lie in the data section
// of dataLen bytes and tile it exactly.
func (p *parser) checkLayout(entries []entry, dataLen int64) error {
	for _, e := range entries {
		if e.end > dataLen {
			return p.errf(e.name, "data_offsets [%d, %d] out of range: the data section has %d bytes", e.begin, e.end, dataLen)
		}
	}
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), strings.Compare(a.name, b.name))
	})
	var prev *entry
	pos := int64(0)
	for i := range sorted {
		e := &sorted[i]
		switch {
		case e.begin < pos:
			return p.errf(e.name, "data_offsets [%d, %d] overlap tensor %q at [%d, %d]", e.begin, e.end, prev.name, prev.begin, prev.end)
		case e.begin > pos:
			return p.errf(e.name, "data_offsets [%d, %d] leave bytes %d to %d of the data section unused", e.begin, e.end, pos, e.begin)
		}
		pos = e.end
		prev = e
	}
	if pos != dataLen {
		return p.errf("", "data section has %d bytes but the tensors cover only %d", dataLen, pos)
	}
	return nil
}

// eachMember calls fn for every member of the JSON object in data, in order,
// and rejects duplicate keys. It returns the offset just past the object.
func eachMember(data []byte, fn func(key string, val json.RawMessage) error) (int64, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return 0, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return 0, fmt.Errorf("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, err
		}
		key, ok := tok.(string)
		if !ok {
			return 0, fmt.Errorf("object key is %v, not a string", tok)
		}
		if seen[key] {
			return 0, duplicateKeyError(key)
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return 0, fmt.Errorf("value of %q: %w", key, err)
		}
		if err := fn(key, val); err != nil {
			return 0, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return 0, err
	}
	return dec.InputOffset(), nil
}

// duplicateKeyError reports a key that appears twice in one JSON object.
type duplicateKeyError string

func (e duplicateKeyError) Error() string { return fmt.Sprintf("duplicate key %q", string(e)) }

// abbreviate quotes a JSON value for an error message, shortened.
func abbreviate(v json.RawMessage) string {
	const max = 40
	if len(v) > max {
		return string(v[:max]) + "…"
	}
	return string(v)
}
