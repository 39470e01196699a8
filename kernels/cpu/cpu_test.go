package cpu_test

import (
	"testing"

	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/kernels/kerneltest"
)

func TestConformance(t *testing.T) { kerneltest.Run(t, cpu.New()) }
