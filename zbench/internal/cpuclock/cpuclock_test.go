package cpuclock

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGHz(t *testing.T) {
	ghz, ok := GHz()
	if runtime.GOARCH != "amd64" {
		assert.False(t, ok)
		return
	}
	require.True(t, ok)
	// Every x86 core made runs between these; a chain the core ran
	// two additions per cycle of (or a broken timer) would read above.
	assert.Greater(t, ghz, 0.5)
	assert.Less(t, ghz, 7.0)
	t.Logf("%.3f GHz", ghz)
}
