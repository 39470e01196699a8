package kernels

import (
	"fmt"
	"strconv"
	"strings"
)

// Shape lists a tensor's dimensions, outermost first.
type Shape []int

// Len is the number of elements: the product of the dimensions (1 for a
// scalar).
func (s Shape) Len() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether s and t have the same dimensions.
func (s Shape) Equal(t []int) bool {
	if len(s) != len(t) {
		return false
	}
	for i := range s {
		if s[i] != t[i] {
			return false
		}
	}
	return true
}

// Last returns the innermost dimension (1 for a scalar).
func (s Shape) Last() int {
	if len(s) == 0 {
		return 1
	}
	return s[len(s)-1]
}

// Rows is the product of all but the innermost dimension: the number of rows
// an op over the last axis processes.
func (s Shape) Rows() int {
	if len(s) == 0 {
		return 1
	}
	return Shape(s[:len(s)-1]).Len()
}

// String formats s as [2 3 4].
func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Validate checks that every dimension is positive and the element count
// fits in an int.
func (s Shape) Validate() error {
	n := 1
	for i, d := range s {
		if d <= 0 {
			return fmt.Errorf("kernels: dimension %d of shape %v is %d, want > 0: %w", i, s, d, ErrShape)
		}
		if n > (1<<62)/d {
			return fmt.Errorf("kernels: shape %v has too many elements: %w", s, ErrShape)
		}
		n *= d
	}
	return nil
}
