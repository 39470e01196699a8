//go:build !unix

package gguf

// mapFile reads the file at path into memory.
func mapFile(path string) ([]byte, func() error, error) { return mapFileFallback(path) }
