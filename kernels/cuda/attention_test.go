//go:build cuda

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/zbench/zbench/kernels"
)

// TestFlashKind checks which flash-attention kernel each device runs: the
// Hopper kernel only on compute capability 9.0 and only when FlashEnv asks
// for it.
func TestFlashKind(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		env, want    string
	}{
		{7, 5, "wgmma", ""},
		{8, 0, "", "mma"},
		{8, 9, "wgmma", "mma"},
		{9, 0, "", "mma"},
		{9, 0, "mma", "mma"},
		{9, 0, "wgmma", "wgmma"},
		{10, 0, "wgmma", "mma"},
	} {
		assert.Equal(t, c.want, flashKind(c.major, c.minor, c.env), "cc %d.%d, %s=%q", c.major, c.minor, FlashEnv, c.env)
	}
}

// TestFlashSM90Geometry checks the Hopper flash-attention kernel's tensor
// maps and shared memory against attention.cu's layout: 4-D maps whose
// outer dimensions are the head and the batch entry, at the strides of
// [B, H, S, D] tensors or of a packed projection, boxes of 64 elements
// (128 bytes, the swizzle's width) by 128 rows, byte strides of whole 16
// bytes; Q, the ring of K and V stages and the mbarriers within 227 KiB.
func TestFlashSM90Geometry(t *testing.T) {
	d := kernels.AttentionDims{B: 2, Hq: 8, Hkv: 2, Sq: 300, Sk: 500, D: 128}
	s := flashSM90Specs(contiguousLayout(9<<20, 1<<20, 2<<20, 3<<20, d), d, 2)
	assert.Equal(t, tensorMapSpec{1 << 20, []uint64{128, 300, 8, 2}, []uint64{256, 300 * 256, 8 * 300 * 256}, []uint32{64, 128, 1, 1}}, s[0], "q")
	assert.Equal(t, tensorMapSpec{2 << 20, []uint64{128, 500, 2, 2}, []uint64{256, 500 * 256, 2 * 500 * 256}, []uint32{64, 128, 1, 1}}, s[1], "k")
	assert.Equal(t, tensorMapSpec{3 << 20, []uint64{128, 500, 2, 2}, []uint64{256, 500 * 256, 2 * 500 * 256}, []uint32{64, 128, 1, 1}}, s[2], "v")

	p := kernels.AttentionDims{B: 2, Hq: 8, Hkv: 2, Sq: 300, Sk: 300, D: 64} // qkv [2, 300, 12, 64]
	l := packedLayout(9<<20, 1<<20, p, 2)
	assert.Equal(t, attnLayout{out: 9 << 20, q: 1 << 20, k: 1<<20 + 8*64*2, v: 1<<20 + 10*64*2,
		qRow: 12 * 64, qHead: 64, qBatch: 300 * 12 * 64, kvRow: 12 * 64, kvHead: 64, kvBatch: 300 * 12 * 64,
		oRow: 8 * 64, oHead: 64, oBatch: 300 * 8 * 64}, l, "packed layout")
	s = flashSM90Specs(l, p, 2)
	assert.Equal(t, tensorMapSpec{1<<20 + 8*64*2, []uint64{64, 300, 2, 2}, []uint64{12 * 128, 128, 300 * 12 * 128}, []uint32{64, 128, 1, 1}}, s[1], "packed k")

	for _, hd := range []int{64, 128} {
		d.D, p.D = hd, hd
		for _, l := range []attnLayout{contiguousLayout(0, 1<<20, 2<<20, 3<<20, d), packedLayout(0, 1<<20, p, 2)} {
			for _, m := range flashSM90Specs(l, d, 2) {
				assert.Zero(t, m.base%16, "d%d: 16-byte aligned base", hd)
				for _, st := range m.strides {
					assert.Zero(t, st%16, "d%d: byte strides of whole 16 bytes", hd)
				}
				assert.Equal(t, uint32(64), m.box[0], "d%d: 128-byte box rows", hd)
			}
		}
		stages := map[int]int{64: 4, 128: 3}[hd]
		assert.Equal(t, 1024+128*hd*2+stages*2*128*hd*2+8*(1+2*stages), flashSmem["wgmma"][hd], "d%d shared memory", hd)
		assert.LessOrEqual(t, flashSmem["wgmma"][hd], 227<<10, "d%d shared memory", hd)
	}
}
