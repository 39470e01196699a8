package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/cpu/internal/hgemv"
)

// TestRowDotsPathsAgree checks the hgemv kernels against the Go rowDot
// and both against float64 sums of the widened weights, on rows of a
// weight at every tail length either side of the kernels' steps of 16 and
// 64 values, for float32, float16 and bfloat16 weights. The sums differ
// only in their order, so each must be within float32 rounding of the sum
// of the terms' magnitudes.
func TestRowDotsPathsAgree(t *testing.T) {
	if !hgemv.Available {
		t.Skip("no AVX-512 on this CPU (or -tags purego): the Go rowDot is the only path")
	}
	be := New()
	rng := rand.New(rand.NewPCG(21, 22))
	const rows = 3
	for _, dt := range kernels.FloatTypes {
		for _, k := range []int{1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 79, 80, 81, 130, 2048, 5632} {
			t.Run(fmt.Sprintf("%v/k=%d", dt, k), func(t *testing.T) {
				wv := make([]float32, rows*k)
				for i := range wv {
					wv[i] = float32(rng.NormFloat64())
				}
				w, err := be.Alloc(dt, rows, k)
				require.NoError(t, err)
				defer func() { require.NoError(t, be.Free(w)) }()
				require.NoError(t, kernels.UploadFloat32(w, wv))
				stored, err := kernels.ToFloat32(w)
				require.NoError(t, err)
				x := make([]float32, k)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				asm := rowDots(w, k).one
				useHgemv = false
				ref := rowDots(w, k).one
				useHgemv = true
				for j := range rows {
					var want, mag float64
					for p, v := range stored[j*k : (j+1)*k] {
						want += float64(x[p]) * float64(v)
						mag += math.Abs(float64(x[p]) * float64(v))
					}
					bound := float64(k)*mag*1.2e-7 + 1e-30
					require.InDelta(t, want, asm(x, j), bound, "row %d: assembly", j)
					require.InDelta(t, want, ref(x, j), bound, "row %d: Go", j)
				}
			})
		}
	}
}

// BenchmarkGemvDecode times MatMul's decode product, rows rows (the
// sequences of a decode step) times TinyLlama's MLP up-projection weight
// [5632, 2048] transposed, with the weight in each float dtype: GB/s of
// the weight read and GFLOP/s, cycling over enough copies of it (277 MB
// in float32) that every call reads it from memory, as a model's decode
// step does.
func BenchmarkGemvDecode(b *testing.B) {
	const n, k, copies = 5632, 2048, 6
	be := New()
	rng := rand.New(rand.NewPCG(23, 24))
	wv := make([]float32, n*k)
	for i := range wv {
		wv[i] = float32(2*rng.Float64() - 1)
	}
	for _, dt := range kernels.FloatTypes {
		b.Run(fmt.Sprintf("dtype=%v", dt), func(b *testing.B) {
			var ws []*kernels.Tensor
			for range copies {
				w, err := be.Alloc(dt, n, k)
				require.NoError(b, err)
				require.NoError(b, kernels.UploadFloat32(w, wv))
				ws = append(ws, w)
			}
			benchDecodeRows(b, be, dt, n, k, n*k*dt.Size(), func(out, x *kernels.Tensor, i int) error {
				return be.MatMul(out, x, ws[i%copies], kernels.MatMulParams{TransB: true})
			})
			for _, w := range ws {
				require.NoError(b, be.Free(w))
			}
		})
	}
}

// BenchmarkPrefillProduct times MatMul's prefill product, 128 rows times
// TinyLlama's MLP up-projection weight [5632, 2048] transposed, with the
// operands in each float dtype: GFLOP/s.
func BenchmarkPrefillProduct(b *testing.B) {
	const m, n, k = 128, 5632, 2048
	be := New()
	rng := rand.New(rand.NewPCG(25, 26))
	wv := make([]float32, n*k)
	for i := range wv {
		wv[i] = float32(2*rng.Float64() - 1)
	}
	for _, dt := range kernels.FloatTypes {
		b.Run(fmt.Sprintf("dtype=%v", dt), func(b *testing.B) {
			w, err := be.Alloc(dt, n, k)
			require.NoError(b, err)
			require.NoError(b, kernels.UploadFloat32(w, wv))
			x, err := be.Alloc(dt, m, k)
			require.NoError(b, err)
			require.NoError(b, kernels.UploadFloat32(x, wv[:m*k]))
			out, err := be.Alloc(dt, m, n)
			require.NoError(b, err)
			for b.Loop() {
				if err := be.MatMul(out, x, w, kernels.MatMulParams{TransB: true}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			for _, t := range []*kernels.Tensor{w, x, out} {
				require.NoError(b, be.Free(t))
			}
		})
	}
}

// BenchmarkWGemmPrefill times WMatMul's prefill product, rows rows (a
// serving engine's prompt chunk of 64 tokens, and 128) times a
// weight-only quantized [5632, 2048] weight (TinyLlama's MLP
// up-projection): int8 per channel, in groups of 32 with float16 scales
// (GGUF's Q8_0 blocks), int4 in groups of 32 (GGUF's Q4_0): GFLOP/s.
func BenchmarkWGemmPrefill(b *testing.B) {
	const n, k = 5632, 2048
	be := New()
	rng := rand.New(rand.NewPCG(33, 34))
	type format struct {
		f     kernels.WeightFormat
		group int
		f16   bool
	}
	for _, c := range []format{{kernels.WInt8, 0, false}, {kernels.WInt8, 32, true}, {kernels.WInt4, 32, false}} {
		w, _ := randQWeight(b, be, rng, c.f, c.group, n, k)
		if c.f16 {
			halfScales(b, be, &w)
		}
		for _, m := range []int{64, 128} {
			b.Run(fmt.Sprintf("format=%v/group=%d/rows=%d", c.f, c.group, m), func(b *testing.B) {
				xv := make([]float32, m*k)
				for i := range xv {
					xv[i] = float32(2*rng.Float64() - 1)
				}
				x, err := kernels.FromFloat32(be, kernels.F32, xv, m, k)
				require.NoError(b, err)
				out, err := be.Alloc(kernels.F32, m, n)
				require.NoError(b, err)
				for b.Loop() {
					if err := be.WMatMul(out, x, w, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				require.NoError(b, be.Free(x))
				require.NoError(b, be.Free(out))
			})
		}
		require.NoError(b, be.Free(w.Data))
		require.NoError(b, be.Free(w.Scales))
	}
}

// BenchmarkWGemvDecode times WMatMul's decode product, rows rows times a
// weight-only quantized [5632, 2048] weight (TinyLlama's MLP
// up-projection) in int8 per channel and in groups of 32 (GGUF's Q8_0
// blocks), and in int4 with groups of 32 (GGUF's Q4_0 blocks) and 128:
// GB/s of codes and scales read and GFLOP/s, cycling over enough copies
// that every call reads them from memory.
func BenchmarkWGemvDecode(b *testing.B) {
	const n, k, copies = 5632, 2048, 12
	be := New()
	rng := rand.New(rand.NewPCG(29, 30))
	type format struct {
		f     kernels.WeightFormat
		group int
	}
	for _, c := range []format{{kernels.WInt8, 0}, {kernels.WInt8, 32}, {kernels.WInt4, 32}, {kernels.WInt4, 128}} {
		b.Run(fmt.Sprintf("format=%v/group=%d", c.f, c.group), func(b *testing.B) {
			var ws []kernels.QWeight
			bytes := 0
			for range copies {
				w, wb := randQWeight(b, be, rng, c.f, c.group, n, k)
				ws, bytes = append(ws, w), wb
			}
			benchDecodeRows(b, be, kernels.F32, n, k, bytes, func(out, x *kernels.Tensor, i int) error {
				return be.WMatMul(out, x, ws[i%copies], nil)
			})
			for _, w := range ws {
				require.NoError(b, be.Free(w.Data))
				require.NoError(b, be.Free(w.Scales))
			}
		})
	}
}

// benchDecodeRows times mul(out, x, i), the i-th call of a decode product
// against an [n, k] weight of the given bytes, for the rows of a decode
// step at batch 1, 4, 8 and 16 (the batches a serving engine runs), x and
// out in dtype dt: GB/s of the weight read and GFLOP/s.
func benchDecodeRows(b *testing.B, be *Backend, dt kernels.DType, n, k, bytes int, mul func(out, x *kernels.Tensor, i int) error) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, m := range []int{1, 2, 3, 4, 5, 6, 8, 9, 16} {
		b.Run(fmt.Sprintf("rows=%d", m), func(b *testing.B) {
			xv := make([]float32, m*k)
			for i := range xv {
				xv[i] = float32(2*rng.Float64() - 1)
			}
			x, err := kernels.FromFloat32(be, dt, xv, m, k)
			require.NoError(b, err)
			out, err := be.Alloc(dt, m, n)
			require.NoError(b, err)
			i := 0
			for b.Loop() {
				if err := mul(out, x, i); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			require.NoError(b, be.Free(x))
			require.NoError(b, be.Free(out))
		})
	}
}

// randQWeight returns a weight-only quantized [n, k] weight of format f
// in groups of group values (0: a scale per row), its codes and scales
// drawn from rng, and the bytes it holds.
func randQWeight(tb testing.TB, be *Backend, rng *rand.Rand, f kernels.WeightFormat, group, n, k int) (kernels.QWeight, int) {
	codes, nscales := n*k, n
	if group > 0 {
		nscales = n * k / group
	}
	if f != kernels.WInt8 {
		codes /= 2
	}
	data := make([]float32, codes)
	for i := range data {
		data[i] = float32(rng.IntN(256) - 128)
	}
	sv := make([]float32, nscales)
	for i := range sv {
		sv[i] = float32(0.01 * (1 + rng.Float64()))
	}
	w := kernels.QWeight{Format: f, Group: group}
	var err error
	w.Data, err = kernels.FromFloat32(be, kernels.I8, data, n, codes/n)
	require.NoError(tb, err)
	sshape := []int{n, nscales / n}
	if group == 0 {
		sshape = sshape[:1]
	}
	w.Scales, err = kernels.FromFloat32(be, kernels.F32, sv, sshape...)
	require.NoError(tb, err)
	return w, codes + 4*nscales
}

// halfScales replaces w's float32 scales by their float16 roundings, as
// GGUF's blocks hold them.
func halfScales(tb testing.TB, be *Backend, w *kernels.QWeight) {
	sv, err := kernels.ToFloat32(w.Scales)
	require.NoError(tb, err)
	shape := w.Scales.Shape()
	require.NoError(tb, be.Free(w.Scales))
	w.Scales, err = kernels.FromFloat32(be, kernels.F16, sv, shape...)
	require.NoError(tb, err)
}

// TestDecodeRowsBatchInvariant checks that a decode product's row is the
// same bit for bit whatever the number of rows beside it, for float and
// weight-only quantized weights, so that a sequence decoded in a serving
// engine's batch gets the logits it gets alone.
func TestDecodeRowsBatchInvariant(t *testing.T) {
	be := New()
	rng := rand.New(rand.NewPCG(27, 28))
	const maxRows, n = 16, 37
	type weight struct {
		name string
		k    int
		dt   kernels.DType // of x and out
		mul  func(out, x *kernels.Tensor) error
	}
	var ws []weight
	for _, dt := range kernels.FloatTypes {
		const k = 1029
		wv := make([]float32, n*k)
		for i := range wv {
			wv[i] = float32(rng.NormFloat64())
		}
		w, err := kernels.FromFloat32(be, dt, wv, n, k)
		require.NoError(t, err)
		ws = append(ws, weight{dt.String(), k, dt, func(out, x *kernels.Tensor) error {
			return be.MatMul(out, x, w, kernels.MatMulParams{TransB: true})
		}})
	}
	for _, c := range []struct {
		f        kernels.WeightFormat
		group, k int
	}{{kernels.WInt8, 0, 2051}, {kernels.WInt8, 0, 2048}, {kernels.WInt8, 32, 512}, {kernels.WInt8, 32, 160}, {kernels.WInt4, 32, 512}} {
		qw, _ := randQWeight(t, be, rng, c.f, c.group, n, c.k)
		ws = append(ws, weight{fmt.Sprintf("%v/group=%d/k=%d", c.f, c.group, c.k), c.k, kernels.F32, func(out, x *kernels.Tensor) error {
			return be.WMatMul(out, x, qw, nil)
		}})
	}
	for _, w := range ws {
		t.Run(w.name, func(t *testing.T) {
			xv := make([]float32, maxRows*w.k)
			for i := range xv {
				xv[i] = float32(rng.NormFloat64())
			}
			product := func(rows []float32, m int) []float32 {
				x, err := kernels.FromFloat32(be, w.dt, rows, m, w.k)
				require.NoError(t, err)
				out, err := be.Alloc(w.dt, m, n)
				require.NoError(t, err)
				require.NoError(t, w.mul(out, x))
				got, err := kernels.ToFloat32(out)
				require.NoError(t, err)
				require.NoError(t, be.Free(x))
				require.NoError(t, be.Free(out))
				return got
			}
			alone := make([]float32, 0, maxRows*n)
			for i := range maxRows {
				alone = append(alone, product(xv[i*w.k:(i+1)*w.k], 1)...)
			}
			for _, m := range []int{2, 3, 4, 5, 6, 7, 8, 11, 13, 16} {
				got := product(xv[:m*w.k], m)
				for i, v := range got {
					require.Equal(t, math.Float32bits(alone[i]), math.Float32bits(v), "m=%d: row %d column %d: %v in the batch, %v alone", m, i/n, i%n, v, alone[i])
				}
			}
		})
	}
}
