package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ValueType is the type of a metadata value (gguf_type).
type ValueType uint32

// Metadata value types.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// size is the encoded size of a fixed-size type, and whether t is one.
func (t ValueType) size() (int, bool) {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1, true
	case TypeUint16, TypeInt16:
		return 2, true
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4, true
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8, true
	}
	return 0, false
}

// Value is a metadata value: a scalar (uint8 … float64, bool, string, as
// the Go type of the same name) or an array of one element type
// ([]uint8 … []string, or []Value for arrays of arrays).
type Value struct {
	Type ValueType
	// Elem is an array's element type.
	Elem   ValueType
	scalar any
}

// Any returns the value as its Go type (see Value).
func (v Value) Any() any { return v.scalar }

// String describes the value briefly, for messages.
func (v Value) String() string {
	if v.Type == TypeArray {
		return fmt.Sprintf("array of %d %s", v.Len(), v.Elem)
	}
	return fmt.Sprintf("%s %v", v.Type, v.scalar)
}

// Len is an array's length (0 for a scalar).
func (v Value) Len() int {
	switch a := v.scalar.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	case []Value:
		return len(a)
	}
	return 0
}

// Int returns an integer scalar of any integer type, and whether v is one.
func (v Value) Int() (int64, bool) {
	switch x := v.scalar.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// Float returns a float32 or float64 scalar, and whether v is one.
func (v Value) Float() (float64, bool) {
	switch x := v.scalar.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// Ints returns an array of any integer type, widened, and whether v is one.
func (v Value) Ints() ([]int64, bool) {
	if v.Type != TypeArray {
		return nil, false
	}
	switch v.Elem {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeInt64:
	case TypeUint64:
		for _, x := range v.scalar.([]uint64) {
			if x > math.MaxInt64 {
				return nil, false
			}
		}
	default:
		return nil, false
	}
	out := make([]int64, v.Len())
	for i := range out {
		switch a := v.scalar.(type) {
		case []uint8:
			out[i] = int64(a[i])
		case []int8:
			out[i] = int64(a[i])
		case []uint16:
			out[i] = int64(a[i])
		case []int16:
			out[i] = int64(a[i])
		case []uint32:
			out[i] = int64(a[i])
		case []int32:
			out[i] = int64(a[i])
		case []uint64:
			out[i] = int64(a[i])
		case []int64:
			out[i] = a[i]
		}
	}
	return out, true
}

// Scalar values of each fixed-size type, for writers.

// Uint32 is a uint32 value.
func Uint32(x uint32) Value { return Value{Type: TypeUint32, scalar: x} }

// Int32 is an int32 value.
func Int32(x int32) Value { return Value{Type: TypeInt32, scalar: x} }

// Float32 is a float32 value.
func Float32(x float32) Value { return Value{Type: TypeFloat32, scalar: x} }

// Bool is a bool value.
func Bool(x bool) Value { return Value{Type: TypeBool, scalar: x} }

// String is a string value.
func String(x string) Value { return Value{Type: TypeString, scalar: x} }

// Strings is an array of strings.
func Strings(x []string) Value { return Value{Type: TypeArray, Elem: TypeString, scalar: x} }

// Float32s is an array of float32.
func Float32s(x []float32) Value { return Value{Type: TypeArray, Elem: TypeFloat32, scalar: x} }

// Int32s is an array of int32.
func Int32s(x []int32) Value { return Value{Type: TypeArray, Elem: TypeInt32, scalar: x} }

// scalarValue decodes a fixed-size scalar of type t from b.
func scalarValue(t ValueType, b []byte, key string) (Value, error) {
	v := Value{Type: t}
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		v.scalar = b[0]
	case TypeInt8:
		v.scalar = int8(b[0])
	case TypeBool:
		if b[0] > 1 {
			return Value{}, fmt.Errorf("metadata %s: bool byte %d, want 0 or 1", key, b[0])
		}
		v.scalar = b[0] == 1
	case TypeUint16:
		v.scalar = le.Uint16(b)
	case TypeInt16:
		v.scalar = int16(le.Uint16(b))
	case TypeUint32:
		v.scalar = le.Uint32(b)
	case TypeInt32:
		v.scalar = int32(le.Uint32(b))
	case TypeFloat32:
		v.scalar = math.Float32frombits(le.Uint32(b))
	case TypeUint64:
		v.scalar = le.Uint64(b)
	case TypeInt64:
		v.scalar = int64(le.Uint64(b))
	case TypeFloat64:
		v.scalar = math.Float64frombits(le.Uint64(b))
	}
	return v, nil
}

// scalarArray decodes len(b)/size elements of fixed-size type t.
func scalarArray(t ValueType, b []byte, key string) (any, error) {
	le := binary.LittleEndian
	size, _ := t.size()
	n := len(b) / size
	switch t {
	case TypeUint8:
		return append([]uint8(nil), b...), nil
	case TypeInt8:
		a := make([]int8, n)
		for i := range a {
			a[i] = int8(b[i])
		}
		return a, nil
	case TypeBool:
		a := make([]bool, n)
		for i := range a {
			if b[i] > 1 {
				return nil, fmt.Errorf("metadata %s[%d]: bool byte %d, want 0 or 1", key, i, b[i])
			}
			a[i] = b[i] == 1
		}
		return a, nil
	case TypeUint16:
		a := make([]uint16, n)
		for i := range a {
			a[i] = le.Uint16(b[2*i:])
		}
		return a, nil
	case TypeInt16:
		a := make([]int16, n)
		for i := range a {
			a[i] = int16(le.Uint16(b[2*i:]))
		}
		return a, nil
	case TypeUint32:
		a := make([]uint32, n)
		for i := range a {
			a[i] = le.Uint32(b[4*i:])
		}
		return a, nil
	case TypeInt32:
		a := make([]int32, n)
		for i := range a {
			a[i] = int32(le.Uint32(b[4*i:]))
		}
		return a, nil
	case TypeFloat32:
		a := make([]float32, n)
		for i := range a {
			a[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return a, nil
	case TypeUint64:
		a := make([]uint64, n)
		for i := range a {
			a[i] = le.Uint64(b[8*i:])
		}
		return a, nil
	case TypeInt64:
		a := make([]int64, n)
		for i := range a {
			a[i] = int64(le.Uint64(b[8*i:]))
		}
		return a, nil
	default: // TypeFloat64
		a := make([]float64, n)
		for i := range a {
			a[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return a, nil
	}
}

// appendValue appends v's encoding (without its type) to b.
func appendValue(b []byte, v Value) ([]byte, error) {
	le := binary.LittleEndian
	switch x := v.scalar.(type) {
	case uint8:
		return append(b, x), nil
	case int8:
		return append(b, byte(x)), nil
	case bool:
		if x {
			return append(b, 1), nil
		}
		return append(b, 0), nil
	case uint16:
		return le.AppendUint16(b, x), nil
	case int16:
		return le.AppendUint16(b, uint16(x)), nil
	case uint32:
		return le.AppendUint32(b, x), nil
	case int32:
		return le.AppendUint32(b, uint32(x)), nil
	case float32:
		return le.AppendUint32(b, math.Float32bits(x)), nil
	case uint64:
		return le.AppendUint64(b, x), nil
	case int64:
		return le.AppendUint64(b, uint64(x)), nil
	case float64:
		return le.AppendUint64(b, math.Float64bits(x)), nil
	case string:
		return appendString(b, x), nil
	}
	if v.Type != TypeArray {
		return nil, fmt.Errorf("value of type %s holds %T", v.Type, v.scalar)
	}
	b = le.AppendUint32(b, uint32(v.Elem))
	b = le.AppendUint64(b, uint64(v.Len()))
	var err error
	each := func(n int, at func(i int) Value) {
		for i := 0; i < n && err == nil; i++ {
			b, err = appendValue(b, at(i))
		}
	}
	switch a := v.scalar.(type) {
	case []uint8:
		return append(b, a...), nil
	case []int8:
		each(len(a), func(i int) Value { return Value{scalar: a[i]} })
	case []bool:
		each(len(a), func(i int) Value { return Value{scalar: a[i]} })
	case []uint16:
		each(len(a), func(i int) Value { return Value{scalar: a[i]} })
	case []int16:
		each(len(a), func(i int) Value { return Value{scalar: a[i]} })
	case []uint32:
		each(len(a), func(i int) Value { return Value{scalar: a[i]} })
	case []int32:
		each(len(a), func(i int) Value { return Value{scalar: a[i]} })
	case []float32:
		each(len(a), func(i int) Value { return Value{scalar: a[i]} })
	case []uint64:
		each(len(a), func(i int) Value { return Value{scalar: a[i]} })
	case []int64:
		each(len(a), func(i int) Value { return Value{scalar: a[i]} })
	case []float64:
		each(len(a), func(i int) Value { return Value{scalar: a[i]} })
	case []string:
		each(len(a), func(i int) Value { return Value{scalar: a[i]} })
	case []Value:
		for _, e := range a {
			if e.Type != TypeArray {
				return nil, fmt.Errorf("an array of arrays holds a %s", e.Type)
			}
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("array value holds %T", v.scalar)
	}
	return b, err
}

// appendString appends a GGUF string.
func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}
