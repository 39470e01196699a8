//go:build !amd64

package membw

const haveAsm = false

func sumAsm(*byte, int) uint64 { panic("membw: no assembly on this architecture") }
