package cpu

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// cpuID returns the number of the processor the calling thread runs on
// (getcpu(2)), or −1 where the call fails.
func cpuID() int {
	var c uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c)), 0, 0); e != 0 {
		return -1
	}
	return int(c)
}
