package cpu_test

import (
	"testing"

	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/kernels/kerneltest"
)

func TestGolden(t *testing.T) { kerneltest.RunGolden(t, cpu.New()) }
