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
// maps and shared memory against attention.cu's layout: 3-D maps whose
// outer dimension is the head, boxes of 64 elements (128 bytes, the
// swizzle's width) by 128 rows, strides of whole 16 bytes; Q, the ring of
// K and V stages and the mbarriers within 227 KiB.
func TestFlashSM90Geometry(t *testing.T) {
	d := kernels.AttentionDims{B: 2, Hq: 8, Hkv: 2, Sq: 300, Sk: 500, D: 128}
	s := flashSM90Specs(1<<20, 2<<20, 3<<20, d, 2)
	assert.Equal(t, tensorMapSpec{1 << 20, []uint64{128, 300, 16}, []uint64{256, 300 * 256}, []uint32{64, 128, 1}}, s[0], "q")
	assert.Equal(t, tensorMapSpec{2 << 20, []uint64{128, 500, 4}, []uint64{256, 500 * 256}, []uint32{64, 128, 1}}, s[1], "k")
	assert.Equal(t, tensorMapSpec{3 << 20, []uint64{128, 500, 4}, []uint64{256, 500 * 256}, []uint32{64, 128, 1}}, s[2], "v")
	for _, hd := range []int{64, 128} {
		d.D = hd
		for _, m := range flashSM90Specs(1<<20, 2<<20, 3<<20, d, 2) {
			for _, st := range m.strides {
				assert.Zero(t, st%16, "d%d: row strides of whole 16 bytes", hd)
			}
			assert.Equal(t, uint32(64), m.box[0], "d%d: 128-byte box rows", hd)
		}
		stages := map[int]int{64: 4, 128: 3}[hd]
		assert.Equal(t, 1024+128*hd*2+stages*2*128*hd*2+8*(1+2*stages), flashSM90Smem[hd], "d%d shared memory", hd)
		assert.LessOrEqual(t, flashSM90Smem[hd], 227<<10, "d%d shared memory", hd)
	}
}
