package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// headerEntry is a tensor's record in the JSON header; the field order is
// the reference implementation's.
type headerEntry struct {
	DType       string   `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// Write writes tensors and metadata (which may be nil) in the safetensors
// format. Tensors are laid out by decreasing dtype alignment, then by name;
// "__metadata__" comes first in the header, which is padded with spaces to a
// multiple of 8 bytes. Each tensor must have a unique, valid UTF-8 name other
// than "__metadata__", a known dtype, and exactly the bytes its shape and
// dtype call for; otherwise nothing is written and the error wraps
// ErrInvalid.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	header, order, err := encodeHeader(tensors, metadata)
	if err != nil {
		return err
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	if _, err := w.Write(header); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	for _, t := range order {
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", t.Name, err)
		}
	}
	return nil
}

// encodeHeader validates the tensors and returns the padded JSON header and
// the tensors in data order.
func encodeHeader(tensors []Tensor, metadata map[string]string) ([]byte, []Tensor, error) {
	order := slices.Clone(tensors)
	seen := make(map[string]bool, len(order))
	for _, t := range order {
		switch {
		case t.Name == metadataKey:
			return nil, nil, fmt.Errorf("safetensors: tensor name %q is reserved: %w", t.Name, ErrInvalid)
		case !utf8.ValidString(t.Name):
			return nil, nil, fmt.Errorf("safetensors: tensor name %q is not valid UTF-8: %w", t.Name, ErrInvalid)
		case seen[t.Name]:
			return nil, nil, fmt.Errorf("safetensors: tensor %q: duplicate name: %w", t.Name, ErrInvalid)
		}
		seen[t.Name] = true
		if err := t.checkData(); err != nil {
			return nil, nil, err
		}
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, nil, fmt.Errorf("safetensors: metadata %q: not valid UTF-8: %w", k, ErrInvalid)
		}
	}
	slices.SortFunc(order, func(a, b Tensor) int {
		if ra, rb := dtypes[a.DType].rank, dtypes[b.DType].rank; ra != rb {
			return rb - ra
		}
		return strings.Compare(a.Name, b.Name)
	})

	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	member := func(key string, val any) error {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		if err := encodeJSON(&buf, key); err != nil {
			return err
		}
		buf.WriteByte(':')
		return encodeJSON(&buf, val)
	}
	if len(metadata) > 0 {
		if err := member(metadataKey, metadata); err != nil { // maps are encoded with sorted keys
			return nil, nil, err
		}
	}
	var off int64
	for _, t := range order {
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		e := headerEntry{DType: t.DType, Shape: shape, DataOffsets: [2]int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
		if err := member(t.Name, e); err != nil {
			return nil, nil, err
		}
	}
	buf.WriteByte('}')
	for buf.Len()%8 != 0 {
		buf.WriteByte(' ')
	}
	if buf.Len() > MaxHeaderSize {
		return nil, nil, fmt.Errorf("safetensors: header of %d bytes exceeds the limit of %d: %w", buf.Len(), MaxHeaderSize, ErrInvalid)
	}
	return buf.Bytes(), order, nil
}

// encodeJSON appends v as compact JSON without HTML escaping.
func encodeJSON(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("safetensors: encode header: %w", err)
	}
	buf.Truncate(buf.Len() - 1) // Encode's trailing newline
	return nil
}
