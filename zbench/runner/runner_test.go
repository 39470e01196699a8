package runner

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCountPasses(t *testing.T) {
	out := []byte("goos: linux\nBenchmarkA-2 1 1 ns/op\nPASS\nBenchmarkA-2 1 1 ns/op\nPASS\nok\n")
	assert.Equal(t, 2, countPasses(out))
	assert.Equal(t, 0, countPasses(nil))
}

func TestSettingsArgs(t *testing.T) {
	s := Settings{Bench: "MatMul", Short: true, Benchtime: "100ms"}
	assert.Equal(t, []string{"-test.run=^$", "-test.bench=MatMul", "-test.count=1", "-test.short", "-test.benchtime=100ms"}, s.args())
	assert.NotEqual(t, s.key(), Settings{Bench: "MatMul"}.key(), "the cache tells settings apart")
	assert.Equal(t, s.key(), Settings{Bench: "MatMul", Short: true, Benchtime: "100ms"}.key())
}

func TestResolve(t *testing.T) {
	repo, err := Open(".")
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	c, err := repo.Resolve("HEAD")
	require.NoError(t, err)
	assert.Len(t, c, 40)
	for _, rev := range []string{"", "-h", "no-such-revision-xyz", "HEAD~100000"} {
		_, err := repo.Resolve(rev)
		require.Error(t, err, rev)
		assert.True(t, errors.Is(err, ErrRevision), rev)
	}
}

// TestInterleaveCancelled checks that a cancelled run stops before its
// next pass and says why.
func TestInterleaveCancelled(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("interrupt signal received")
	cancel(cause)
	r := &Runner{}
	arms := []*Arm{{Label: "base", Binary: "/nonexistent"}, {Label: "head", Binary: "/nonexistent"}}
	steps := 0
	err := r.Interleave(ctx, arms, 3, func(int, int, *Arm) { steps++ })
	require.ErrorIs(t, err, cause)
	assert.Zero(t, steps)
	assert.Empty(t, arms[0].Runs)
}
