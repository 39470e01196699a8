package bench_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/zbench"
)

type matmulCase struct {
	dt       kernels.DType
	n        int // m = n = k
	resident bool
	tf32     bool // F32 operands on TF32 tensor cores: dtype=tf32
}

// dtypeName is the dtype as benchmark names write it.
func (c matmulCase) dtypeName() string {
	if c.tf32 {
		return "tf32"
	}
	return c.dt.String()
}

// matmulCases are square sizes 256…4096 in f32 with host↔device round
// trips at 1024 and 4096, and 16-bit types at 1024; GPUs add the tensor-core
// sizes: f16, bf16, int8, e4m3 and e5m2 at 4096 and 8192, tf32 at 4096;
// CPUs add int8 at 1024 and 4096 and e4m3 and e5m2 (emulated) at 1024. -short keeps 256 and 1024 resident, a 256 round trip
// and int8 at 256 (and bf16 at 4096 on GPUs).
func matmulCases(dev kernels.Backend) []matmulCase {
	gpu := dev.Info().Kind == kernels.GPU
	if testing.Short() {
		cs := []matmulCase{{kernels.F32, 256, true, false}, {kernels.F32, 1024, true, false}, {kernels.F32, 256, false, false},
			{kernels.I8, 256, true, false}}
		if gpu {
			cs = append(cs, matmulCase{kernels.BF16, 4096, true, false})
		}
		return cs
	}
	var cs []matmulCase
	for _, n := range []int{256, 512, 1024, 2048, 4096} {
		cs = append(cs, matmulCase{kernels.F32, n, true, false})
	}
	cs = append(cs,
		matmulCase{kernels.F32, 1024, false, false}, matmulCase{kernels.F32, 4096, false, false},
		matmulCase{kernels.F16, 1024, true, false}, matmulCase{kernels.BF16, 1024, true, false})
	if !gpu {
		cs = append(cs, matmulCase{kernels.I8, 1024, true, false}, matmulCase{kernels.I8, 4096, true, false},
			matmulCase{kernels.E4M3, 1024, true, false}, matmulCase{kernels.E5M2, 1024, true, false})
	}
	if gpu {
		cs = append(cs, matmulCase{kernels.F32, 4096, true, true})
		for _, n := range []int{4096, 8192} {
			cs = append(cs, matmulCase{kernels.F16, n, true, false}, matmulCase{kernels.BF16, n, true, false},
				matmulCase{kernels.I8, n, true, false}, matmulCase{kernels.E4M3, n, true, false},
				matmulCase{kernels.E5M2, n, true, false})
		}
	}
	return cs
}

// BenchmarkMatMul times out = a·b for square matrices. transfer=resident
// keeps operands on the device; transfer=roundtrip uploads a and b and
// downloads out in every iteration, what a caller holding host data pays.
func BenchmarkMatMul(b *testing.B) {
	for _, dev := range devices {
		for _, c := range matmulCases(dev) {
			transfer := "resident"
			if !c.resident {
				transfer = "roundtrip"
			}
			name := fmt.Sprintf("dev=%s/dtype=%s/m=%d/n=%d/k=%d/transfer=%s", dev.Name(), c.dtypeName(), c.n, c.n, c.n, transfer)
			b.Run(name, func(b *testing.B) { benchMatMul(b, dev, c) })
		}
		if !testing.Short() {
			for _, c := range []struct {
				f  kernels.WeightFormat
				dt kernels.DType
			}{{0, kernels.F32}, {0, kernels.BF16}, {kernels.WInt8, kernels.F32}, {kernels.WInt4, kernels.F32}, {kernels.WNF4, kernels.F32}} {
				name := fmt.Sprintf("dev=%s/dtype=%s/m=1/n=%d/k=%d/transfer=resident", dev.Name(), decodeDType(c.f, c.dt), decodeN, decodeK)
				gpu := dev.Info().Kind == kernels.GPU
				switch {
				case gpu:
					name += "/cache=cold"
				case c.dt != kernels.F32:
					continue // a CPU's bf16 decode: LlamaDecode's dtype=bf16
				}
				b.Run(name, func(b *testing.B) { benchDecodeMatMul(b, dev, c.f, c.dt, gpu) })
			}
		}
	}
}

// The decode product of BenchmarkMatMul: one row times TinyLlama's MLP
// up-projection weight [5632, 2048], the memory-bound GEMV of LLM decode,
// in float32 and bfloat16 and weight-only quantized.
const decodeN, decodeK = 5632, 2048

// weightGroups are the 4-bit formats' group sizes: int4's 128 (GPTQ's and
// AWQ's usual), NF4's 64 (bitsandbytes' default block).
var weightGroups = map[kernels.WeightFormat]int{kernels.WInt4: 128, kernels.WNF4: 64}

// weightDType names a weight-only format as a benchmark dtype: w8a16,
// w4a16 (int4) or nf4; 0 is f32, the unquantized product.
func weightDType(f kernels.WeightFormat) string {
	switch f {
	case kernels.WInt8:
		return "w8a16"
	case kernels.WInt4:
		return "w4a16"
	case kernels.WNF4:
		return "nf4"
	}
	return "f32"
}

// decodeDType names a decode product's weight as a benchmark dtype: dt's
// for a float weight (f == 0), else weightDType's.
func decodeDType(f kernels.WeightFormat, dt kernels.DType) string {
	if f == 0 {
		return dt.String()
	}
	return weightDType(f)
}

// benchDecodeMatMul times out [1, N] = x [1, K] · Wᵀ with W [N, K] in
// dt (f == 0: MatMul, x and out in dt too) or weight-only quantized in f
// (WMatMul, x and out in float32). Bytes are the weight's as stored: the
// traffic that bounds decode. rel-err is against the float32 product with
// the unquantized weight, so that the speed of a format shows with its
// accuracy. With cold, the device's cache is flushed before every call: a
// GPU's L2 holds this weight, a model's weights it does not
// (cache=cold).
func benchDecodeMatMul(b *testing.B, dev kernels.Backend, f kernels.WeightFormat, dt kernels.DType, cold bool) {
	wv, xv := uniform(5, kernels.F32, decodeN*decodeK), uniform(6, kernels.F32, decodeK)
	x := upload(b, dev, dt, xv, 1, decodeK)
	out := alloc(b, dev, dt, 1, decodeN)
	bytes := float64(dt.Size()) * float64(decodeN*decodeK)
	var op func() error
	if f == 0 {
		w := upload(b, dev, dt, wv, decodeN, decodeK)
		op = func() error { return dev.MatMul(out, x, w, kernels.MatMulParams{TransB: true}) }
	} else {
		wq, err := kernels.Group[kernels.WeightQuant](dev)
		if err != nil {
			b.Skip(err)
		}
		data, scales, err := quant.QuantizeWeightOnly(f, wv, decodeN, decodeK, weightGroups[f])
		if err != nil {
			b.Fatal(err)
		}
		w := kernels.QWeight{Format: f, Group: weightGroups[f]}
		w.Data = upload(b, dev, kernels.I8, int8sToFloat(data), decodeN, len(data)/decodeN)
		scaleShape := []int{decodeN}
		if f != kernels.WInt8 {
			scaleShape = append(scaleShape, len(scales)/decodeN)
		}
		w.Scales = upload(b, dev, kernels.F32, scales, scaleShape...)
		bytes = float64(len(data) + 4*len(scales))
		op = func() error { return wq.WMatMul(out, x, w, nil) }
	}
	zbench.Measure(b, zbench.Bench{
		Dev:  dev,
		Work: zbench.Workload{FLOPs: 2 * float64(decodeN) * float64(decodeK), Bytes: bytes, DType: dt, ReadOnly: true},
		Op:   op,
		Verify: func() (float64, error) {
			got, err := kernels.ToFloat32(out)
			if err != nil {
				return 0, err
			}
			return sampledMatMulErr(got, xv, transpose(wv, decodeN, decodeK), 1, decodeN, decodeK, 256), nil
		},
		MaxRelErr: dtypeTolerance(decodeDType(f, dt)),
		Cold:      cold,
	})
}

// int8sToFloat widens int8 values to float32 for upload as I8.
func int8sToFloat(v []int8) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func benchMatMul(b *testing.B, dev kernels.Backend, c matmulCase) {
	switch c.dt {
	case kernels.I8:
		benchQMatMul(b, dev, c.n)
		return
	case kernels.E4M3, kernels.E5M2:
		benchFP8MatMul(b, dev, c.n, c.dt)
		return
	}
	n := c.n
	av, bv := uniform(1, c.dt, n*n), uniform(2, c.dt, n*n)
	a, x := upload(b, dev, c.dt, av, n, n), upload(b, dev, c.dt, bv, n, n)
	out := alloc(b, dev, c.dt, n, n)
	params := kernels.MatMulParams{TF32: c.tf32}
	op := func() error { return dev.MatMul(out, a, x, params) }
	if !c.resident {
		hostA, hostB := make([]byte, a.Bytes()), make([]byte, x.Bytes())
		hostOut := make([]byte, out.Bytes())
		if err := dev.Download(hostA, a); err != nil {
			b.Fatal(err)
		}
		if err := dev.Download(hostB, x); err != nil {
			b.Fatal(err)
		}
		op = func() error {
			if err := dev.Upload(a, hostA); err != nil {
				return err
			}
			if err := dev.Upload(x, hostB); err != nil {
				return err
			}
			if err := dev.MatMul(out, a, x, params); err != nil {
				return err
			}
			return dev.Download(hostOut, out)
		}
	}
	size := float64(c.dt.Size())
	maxErr := kernels.Tolerance(c.dt)
	if c.tf32 { // 10-bit mantissas in: f16's tolerance
		maxErr = kernels.Tolerance(kernels.F16)
	}
	zbench.Measure(b, zbench.Bench{
		Dev:  dev,
		Work: zbench.Workload{FLOPs: 2 * float64(n) * float64(n) * float64(n), Bytes: 3 * float64(n*n) * size, DType: c.dt},
		Op:   op,
		Verify: func() (float64, error) {
			got, err := kernels.ToFloat32(out)
			if err != nil {
				return 0, err
			}
			return sampledMatMulErr(got, av, bv, n, n, n, 256), nil
		},
		MaxRelErr: maxErr,
	})
}

// sampledMatMulErr is the relative error of out = a·b ([m,k]·[k,n]) over
// samples random entries, each recomputed in float64: cheap at any size,
// and any systematic error shows.
func sampledMatMulErr(out, a, b []float32, m, n, k, samples int) float64 {
	rng := rand.New(rand.NewPCG(3, 4))
	got, want := make([]float64, samples), make([]float64, samples)
	for s := range samples {
		i, j := rng.IntN(m), rng.IntN(n)
		var sum float64
		for p := range k {
			sum += float64(a[i*k+p]) * float64(b[p*n+j])
		}
		got[s], want[s] = float64(out[i*n+j]), sum
	}
	rel, _ := kernels.RelErr(got, want)
	return rel
}

// int8MatMulErr bounds dtype=int8's rel-err against the float32 product
// of the unquantized inputs: per-tensor int8 of uniform values has a
// relative error of about 0.4% per element, 0.6% in a product.
const int8MatMulErr = 1e-2

// benchQMatMul times the W8A8 product of kernels.Quant: int8 a [n, n]
// times the transpose of int8 b [n, n] (a weight's layout), int32 sums and
// the rescale to float32. Its rel-err is against the float32 product of
// the values before quantization: the accuracy the speed costs.
func benchQMatMul(b *testing.B, dev kernels.Backend, n int) {
	q, err := kernels.Group[kernels.Quant](dev)
	if err != nil {
		b.Skip(err)
	}
	av, bv := uniform(1, kernels.F32, n*n), uniform(2, kernels.F32, n*n)
	af, bf := upload(b, dev, kernels.F32, av, n, n), upload(b, dev, kernels.F32, bv, n, n)
	a, x := alloc(b, dev, kernels.I8, n, n), alloc(b, dev, kernels.I8, n, n)
	sa, sb := upload(b, dev, kernels.F32, []float32{1.0 / kernels.QMax}, 1), alloc(b, dev, kernels.F32, n)
	if err := q.Quantize(a, sa, af, false); err != nil {
		b.Fatal(err)
	}
	if err := q.Quantize(x, sb, bf, true); err != nil { // per output channel
		b.Fatal(err)
	}
	out := alloc(b, dev, kernels.F32, n, n)
	p := kernels.QMatMulParams{AScale: sa, BScale: sb}
	zbench.Measure(b, zbench.Bench{
		Dev:  dev,
		Work: zbench.Workload{FLOPs: 2 * float64(n) * float64(n) * float64(n), Bytes: 2*float64(n*n) + 4*float64(n*n), DType: kernels.I8},
		Op:   func() error { return q.QMatMul(out, a, x, p) },
		Verify: func() (float64, error) {
			got, err := kernels.ToFloat32(out)
			if err != nil {
				return 0, err
			}
			return sampledMatMulErr(got, av, transpose(bv, n, n), n, n, n, 256), nil
		},
		MaxRelErr: int8MatMulErr,
	})
}

// transpose returns the [c, r] transpose of the row-major [r, c] matrix m.
func transpose(m []float32, r, c int) []float32 {
	t := make([]float32, len(m))
	for i := range r {
		for j := range c {
			t[j*r+i] = m[i*c+j]
		}
	}
	return t
}

// benchFP8MatMul times the scaled FP8 product of kernels.FP8: a [n, n] in
// adt and the transpose of b [n, n] in E4M3, each cast with a per-tensor
// current scale (fp8_max/amax), float32 sums, the scales applied to each
// and stored in float32: dtype=e4m3 is the forward's product, dtype=e5m2
// the backward's (a gradient in E5M2 times a weight or an activation in
// E4M3). Its rel-err is against the float32 product of the values before
// the cast: E4M3's three mantissa bits cost about 3% per product, E5M2's
// two about twice that.
func benchFP8MatMul(b *testing.B, dev kernels.Backend, n int, adt kernels.DType) {
	q, err := kernels.Group[kernels.FP8](dev)
	if err != nil {
		b.Skip(err)
	}
	av, bv := uniform(1, kernels.F32, n*n), uniform(2, kernels.F32, n*n)
	var codes [2]*kernels.Tensor
	var inv [2]*kernels.Tensor
	for i, v := range [][]float32{av, bv} {
		var amax float32
		for _, x := range v {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		dt := kernels.E4M3
		if i == 0 {
			dt = adt
		}
		s := kernels.FP8Max(dt) / amax
		codes[i] = alloc(b, dev, dt, n, n)
		if err := q.CastFP8(codes[i], nil, upload(b, dev, kernels.F32, v, n, n), upload(b, dev, kernels.F32, []float32{s}, 1)); err != nil {
			b.Fatal(err)
		}
		inv[i] = upload(b, dev, kernels.F32, []float32{1 / s}, 1)
	}
	out := alloc(b, dev, kernels.F32, n, n)
	p := kernels.FP8MatMulParams{AScaleInv: inv[0], BScaleInv: inv[1]}
	zbench.Measure(b, zbench.Bench{
		Dev:  dev,
		Work: zbench.Workload{FLOPs: 2 * float64(n) * float64(n) * float64(n), Bytes: 2*float64(n*n) + 4*float64(n*n), DType: adt},
		Op:   func() error { return q.FP8MatMul(out, codes[0], codes[1], p) },
		Verify: func() (float64, error) {
			got, err := kernels.ToFloat32(out)
			if err != nil {
				return 0, err
			}
			return sampledMatMulErr(got, av, transpose(bv, n, n), n, n, n, 256), nil
		},
		MaxRelErr: kernels.Tolerance(adt),
	})
}
