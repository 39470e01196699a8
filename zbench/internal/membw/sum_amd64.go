package membw

import "golang.org/x/sys/cpu"

var haveAsm = cpu.X86.HasAVX2

// sumAsm returns the sum of the n bytes at p as 64-bit words, n a positive
// multiple of block, with AVX2 loads into four accumulators, prefetching
// ahead.
//
//go:noescape
func sumAsm(p *byte, n int) uint64
