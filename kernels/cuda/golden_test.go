//go:build cuda

package cuda_test

import (
	"testing"

	"github.com/zbench/zbench/kernels/kerneltest"
)

func TestGolden(t *testing.T) { kerneltest.RunGolden(t, open(t)) }
