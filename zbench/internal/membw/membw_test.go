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

func TestPass(t *testing.T) {
	p := New(1 << 20)
	size := len(p.src)
	clear(p.dst)
	for _, tc := range []struct {
		name      string
		read      bool
		n         int
		wantBytes int
		wantNext  int // where the next window starts
	}{
		{"a window of a third", false, size / 3, 2 * (size / 3 / block * block), size / 3 / block * block},
		{"the next third", true, size / 3, 2 * (size / 3 / block * block), 2 * (size / 3 / block * block)},
		{"too long for what is left: from the start", false, size / 2, size, size / 2},
		{"more than the buffers: all of them", true, 4 * size, 2 * size, size},
		{"less than a block: one block", true, 1, 2 * block, block},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bytes, d := p.Pass(tc.read, tc.n)
			assert.Equal(t, tc.wantBytes, bytes)
			assert.Positive(t, d)
			assert.Equal(t, tc.wantNext, p.next)
		})
	}
	// The copies' windows, [0, size/3) and [0, size/2), reached dst; the
	// rest of it is as cleared.
	half := size / 2
	assert.Equal(t, p.src[:half], p.dst[:half])
	assert.Equal(t, make([]byte, size-half), p.dst[half:])
}

// BenchmarkPass times the read-only and copy passes over a probe's whole
// buffers on huge pages (New) and on Go memory's pages, in GB/s.
func BenchmarkPass(b *testing.B) {
	huge := New(256 << 20)
	n := len(huge.src)
	small := &Probe{src: make([]byte, n), dst: make([]byte, n)}
	copy(small.src, huge.src)
	copy(small.dst, huge.dst)
	for _, pages := range []struct {
		name string
		p    *Probe
	}{{"huge", huge}, {"go", small}} {
		for _, read := range []bool{true, false} {
			stream := "copy"
			if read {
				stream = "read"
			}
			b.Run("pages="+pages.name+"/stream="+stream, func(b *testing.B) {
				var bytes int
				for b.Loop() {
					n, _ := pages.p.Pass(read, n)
					bytes += n
				}
				b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
