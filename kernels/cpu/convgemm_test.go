package cpu

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConvTasks(t *testing.T) {
	for _, c := range []struct {
		name                          string
		groups, m, cog, mr, nr, procs int
		want                          []convTask
	}{
		{"one worker", 1, 3136, 64, 12, 32, 1, []convTask{{0, 0, 3136, 0, 64}}},
		{"pixels split in whole panels", 1, 784, 128, 12, 32, 2,
			[]convTask{{0, 0, 396, 0, 128}, {0, 396, 784, 0, 128}}},
		{"few pixels: filters split", 1, 49, 512, 12, 32, 2,
			[]convTask{{0, 0, 49, 0, 256}, {0, 0, 49, 256, 512}}},
		{"few pixels, fewer filters than workers", 1, 25, 80, 12, 32, 4,
			[]convTask{{0, 0, 25, 0, 32}, {0, 0, 25, 32, 64}, {0, 0, 25, 64, 80}}},
		{"few pixels, filters for half the workers", 1, 30, 64, 12, 32, 4,
			[]convTask{{0, 0, 12, 0, 32}, {0, 0, 12, 32, 64}, {0, 12, 30, 0, 32}, {0, 12, 30, 32, 64}}},
		{"a group per worker", 2, 100, 48, 12, 32, 2,
			[]convTask{{0, 0, 100, 0, 48}, {1, 0, 100, 0, 48}}},
		{"one panel", 1, 5, 7, 12, 32, 2, []convTask{{0, 0, 5, 0, 7}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, convTasks(c.groups, c.m, c.cog, c.mr, c.nr, c.procs))
		})
	}
}
