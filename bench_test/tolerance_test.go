package bench_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/zbench/zbench/kernels"
)

// The rel-err bounds of the benchmarks: each benchmark passes its bound to
// zbench.Measure (Bench.MaxRelErr), which fails a result past it and
// writes it into the result as rel-err-bound, the bound zbench compare's
// accuracy gate reads.

// weightOnly are the tolerances of the weight-only quantized dtypes
// (float activations, weights dequantized inside the product): int8
// weights take int8's; 4-bit ones (16 levels per group: int4 per 128
// values, NF4 per 64) leave about a tenth of a uniform weight's signal as
// noise, 5–9% in a long dot product's relative error.
var weightOnly = map[string]float64{"w8a16": kernels.Tolerance(kernels.I8), "q8_0": kernels.Tolerance(kernels.I8), "w4a16": 1.5e-1, "nf4": 1.5e-1}

// dtypeTolerance is the rel-err accepted for a benchmark of the named
// dtype: kernels.Tolerance of the dtype the results are stored in. TF32
// (10-bit mantissas in) and mixed precision (16-bit attention) take f16's,
// a model's FP8 modules E4M3's, the weight-only formats weightOnly's; an
// unknown or empty dtype takes f32's, the strictest.
func dtypeTolerance(dtype string) float64 {
	if tol, ok := weightOnly[dtype]; ok {
		return tol
	}
	switch dtype {
	case "tf32", "mixed":
		return kernels.Tolerance(kernels.F16)
	case "fp8": // a model's FP8 modules: E4M3's
		return kernels.Tolerance(kernels.E4M3)
	}
	dt, err := kernels.ParseDType(dtype)
	if err != nil {
		return kernels.Tolerance(kernels.F32)
	}
	return kernels.Tolerance(dt)
}

// deepModels are the benchmark name parts (the benchmark, or key=value)
// of models deep enough that rounding accumulates past the dtype's kernel
// tolerance, with the tolerance of each dtype that does. TinyLlama-1.1B
// rounds its residual stream to bfloat16 44 times: PyTorch's own bfloat16
// model is 4.8e-2 off the float64 reference (zbench's 4.1e-2), against the
// kernels' 1.6e-2, which BERT-base's 12 layers meet. ResNet-101 and -152
// round 33 and 50 blocks' activations: torchvision's own bfloat16 models
// are 2.2e-2 and 3.2e-2 off the float64 reference on 32×32 inputs
// (zbench's ResNet-152: 2.1e-2 in bf16, 3.1e-3 in f16), while ResNet-50
// (7.1e-3 at 224×224) and the shallower ones meet the kernels' tolerances.
// TinyLlama in int8 (W8A8 with dynamic per-token activation scales,
// llama.Model.Quantize) is 1.3e-1 off on its synthetic weights, past
// int8's 1e-1: its error is about three times bfloat16's at every depth
// of the same weights (3.3e-2 against 1.1e-2 after one layer, 1.3e-1
// against 4.0e-2 after 22), most of it the per-token rounding of inputs
// 2048 and 5632 channels wide (the int8 weights alone: 4.3e-2), while
// the 2-layer goldens stay within 1e-2. In FP8 (E4M3 weights per channel
// and inputs per token, llama.Model.QuantizeFP8) it is 3.8e-1 off: E4M3's
// three mantissa bits leave about four times int8's error at every depth
// (the 2-layer test model: 4.3e-2 against 1e-2). BERT-base in FP8
// (bert.Model.QuantizeFP8) is 1.1e-1 off the float64 reference, 3.5 times
// its static int8's 3.2e-2, E4M3's 31 dB per input against int8's 40
// over twelve layers. TinyLlama's w4a16 is the GGUF Q4_0 model, held to
// the golden of the same Q4_0-rounded weights (llama.py's
// tinyllama_q4_0), so only float32 arithmetic around the int4 products
// differs: 2.2e-6 on the CPU, held to the Llama goldens' float32 bound,
// 1e-4.
var deepModels = map[string]map[string]float64{
	"BenchmarkBERT":   {"fp8": 1.5e-1},
	"model=tinyllama": {"bf16": 8e-2, "int8": 1.5e-1, "fp8": 5e-1, "w4a16": 1e-4},
	"model=resnet101": {"bf16": 5e-2, "f16": 1e-2, "tf32": 1e-2},
	"model=resnet152": {"bf16": 5e-2, "f16": 1e-2, "tf32": 1e-2},
}

// benchTolerance is the rel-err accepted for the named benchmark (its
// full name, "BenchmarkX/key=value/...", or a part of it) of the named
// dtype: deepModels' entry where a part of the name has one, else
// dtypeTolerance.
func benchTolerance(name, dtype string) float64 {
	for _, part := range strings.Split(name, "/") {
		if tol, ok := deepModels[part][dtype]; ok {
			return tol
		}
	}
	return dtypeTolerance(dtype)
}

func TestDTypeTolerance(t *testing.T) {
	for dtype, want := range map[string]float64{"f32": 2e-5, "": 2e-5, "weird": 2e-5, "f16": 2e-3, "tf32": 2e-3, "mixed": 2e-3, "bf16": 1.6e-2, "int8": 0.1, "e4m3": 0.1,
		"w8a16": 0.1, "w4a16": 0.15, "nf4": 0.15} {
		assert.Equal(t, want, dtypeTolerance(dtype), dtype)
	}
}

func TestBenchTolerance(t *testing.T) {
	for _, tc := range []struct {
		name, dtype string
		want        float64
	}{
		{"BenchmarkLlamaDecode/dev=cpu/dtype=bf16/model=tinyllama/batch=1/ctx=128-2", "bf16", 8e-2},
		{"BenchmarkLlamaDecode/dev=cpu/dtype=f32/model=tinyllama/batch=1/ctx=128-2", "f32", 2e-5},
		{"BenchmarkLlamaDecode/dev=cpu/dtype=int8/model=tinyllama/batch=1/ctx=128-2", "int8", 1.5e-1},
		{"BenchmarkLlamaPrefill/dev=cpu/dtype=int8/model=tiny/batch=1/seq=128-2", "int8", 0.1},
		{"BenchmarkLlamaDecode/dev=cpu/dtype=w4a16/model=tinyllama/batch=1/ctx=128-2", "w4a16", 1e-4},
		{"BenchmarkMatMul/dev=cpu/dtype=w4a16/m=1/n=5632/k=2048", "w4a16", 1.5e-1},
		{"BenchmarkLlamaDecode/dev=cpu/dtype=bf16/model=tiny/batch=1/ctx=128-2", "bf16", 1.6e-2},
		{"BenchmarkBERT/dev=cpu/dtype=bf16/batch=1/seq=128", "bf16", 1.6e-2},
		{"BenchmarkBERT", "fp8", 1.5e-1},
		{"model=resnet152", "tf32", 1e-2},
		{"BenchmarkX/model=tinyllamas/dtype=bf16", "bf16", 1.6e-2},
	} {
		assert.Equal(t, tc.want, benchTolerance(tc.name, tc.dtype), tc.name)
	}
}
