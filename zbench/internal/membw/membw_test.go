package membw

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSum(t *testing.T) {
	for _, n := range []int{0, 7, 8, 255, 256, 257, 1024, 4096 + 24, 1 << 20} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i*7 + 3)
		}
		var want uint64
		for i := 0; i+8 <= n; i += 8 {
			want += binary.LittleEndian.Uint64(p[i:])
		}
		assert.Equal(t, want, Sum(p), "n=%d", n)
	}
}

func TestProbe(t *testing.T) {
	p := New(1 << 20)
	assert.Equal(t, 32<<20, len(p.src), "64 MiB in all at least")
	for name, rate := range map[string]float64{"copy": p.Copy(), "read": p.Read()} {
		// Any machine that runs the tests moves between 100 MB/s and
		// 10 TB/s; a rate outside is a broken timer or a dropped pass.
		assert.Greater(t, rate, 1e8, name)
		assert.Less(t, rate, 1e13, name)
		t.Logf("%s %.1f GB/s", name, rate/1e9)
	}
}
