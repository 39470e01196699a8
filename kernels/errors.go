package kernels

import "errors"

// Sentinel errors; every error a backend returns wraps one of them, so
// callers can test with errors.Is.
var (
	ErrShape       = errors.New("shape mismatch")
	ErrDType       = errors.New("dtype mismatch")
	ErrUnsupported = errors.New("not supported by this backend")
	ErrOutOfMemory = errors.New("out of memory")
	ErrNoDevice    = errors.New("no such device")
	ErrBackend     = errors.New("tensor belongs to another backend")
	ErrFreed       = errors.New("tensor already freed")
	ErrValue       = errors.New("invalid value")
)
