// Package hugemem maps memory of its own, advised as transparent huge
// pages, for the large buffers that stream from main memory: the CPU
// backend's tensors and the bandwidth probe's buffers. 2 MiB pages cut the
// TLB misses and the hardware prefetchers' stops at every 4 KiB page.
package hugemem

// Page is the size of a huge page: Map rounds to it and aligns to it.
const Page = 2 << 20
