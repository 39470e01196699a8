//go:build cuda

package cuda

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/mempool"
)

// launchRec is one recorded launch.
type launchRec struct {
	name        string
	grid, block dim3
	smem        int
	args        []any
}

// dryRun returns a backend that records launches instead of running them,
// as a device of compute capability major.minor with 132 multiprocessors.
func dryRun(major, minor int, recs *[]launchRec) *Backend {
	b := &Backend{major: major, minor: minor, target: imageTarget(major, minor), preferred: preferredTarget(major, minor), l2: 50 << 20,
		info: kernels.DeviceInfo{Kind: kernels.GPU, Name: "dry run", Cores: 132, Attention: flashKind(major, minor, "")}}
	b.record = func(name string, grid, block dim3, smem int, args []any) {
		*recs = append(*recs, launchRec{name, grid, block, smem, args})
	}
	b.pool = mempool.New(b.memAlloc, func(devptr) {}, 0)
	b.errDev = 1 << 40
	b.errHost = unsafe.Pointer(unsafe.SliceData(make([]int32, 4*numChecks))) // downloads read no errors
	return b
}

// dryOps calls every operation with valid arguments in every float dtype
// and with the variants that pick other kernels (tensor-core shapes, TF32,
// head sizes, data checks).
func dryOps(t *testing.T, b *Backend) {
	a := func(dt kernels.DType, shape ...int) *kernels.Tensor {
		x, err := b.Alloc(dt, shape...)
		require.NoError(t, err)
		return x
	}
	f32, i32 := kernels.F32, kernels.I32
	for _, dt := range kernels.FloatTypes {
		x, y, out := a(dt, 4, 64), a(dt, 64), a(dt, 4, 64)
		gamma, beta := a(dt, 64), a(dt, 64)
		mean, rstd := a(f32, 4), a(f32, 4)
		ids, lens := a(i32, 4), a(i32, 2)
		w := a(dt, 64, 64)
		q, kv := a(dt, 2, 4, 8, 64), a(dt, 2, 2, 16, 64)
		q128, kv128 := a(dt, 1, 2, 8, 128), a(dt, 1, 2, 8, 128)
		scores := a(dt, 2, 4, 8, 16)
		pool, table := a(dt, 6, 2, 4, 64), a(i32, 2, 3) // 6 blocks of 4 positions, 3 a sequence
		dq, dk, dv := a(dt, 2, 4, 8, 64), a(dt, 2, 2, 16, 64), a(dt, 2, 2, 16, 64)
		ops := []func() error{
			func() error { return b.Add(out, x, y) },
			func() error { return b.Scale(out, x, 2) },
			func() error { return b.Fill(out, 1) },
			func() error { return b.Cast(a(kernels.E4M3, 4, 64), x) },
			func() error { return b.Act(out, x, kernels.ActGELU) },
			func() error { return b.Act(out, x, kernels.ActTanh) },
			func() error { return b.ActBackward(out, x, x, kernels.ActGELU) },
			func() error { return b.SumRows(y, x) },
			func() error { return b.LayerNorm(out, mean, rstd, x, gamma, beta, 1e-5) },
			func() error { return b.LayerNormBackward(out, gamma, beta, x, x, gamma, mean, rstd) },
			func() error { return b.RMSNorm(out, x, gamma, 1e-5) },
			func() error { return b.Softmax(scores, scores, kernels.AttentionParams{Causal: true, KeyLens: lens}) },
			func() error { return b.SoftmaxBackward(scores, scores, scores) },
			func() error { return b.Embedding(out, w, ids) },
			func() error { return b.EmbeddingBackward(w, out, ids) },
			func() error { return b.CrossEntropy(a(f32, 4), out, ids) },
			func() error { return b.CrossEntropyBackward(out, out, ids, 0.25) },
			func() error { return b.MatMul(out, x, w, kernels.MatMulParams{Bias: y, Act: kernels.ActGELU}) },
			func() error {
				return b.MatMul(a(dt, 3, 5), a(dt, 3, 7), a(dt, 5, 7), kernels.MatMulParams{TransB: true})
			},
			func() error { return b.MatMul(out, x, w, kernels.MatMulParams{TF32: true}) },
			func() error { return b.MatMul(out, x, w, kernels.MatMulParams{TF32: true, TransB: true, Bias: y}) },
			func() error { // BERT's FFN output at batch 1: split-K on the SIMT kernel
				return b.MatMul(a(dt, 128, 768), a(dt, 128, 3072), a(dt, 768, 3072), kernels.MatMulParams{TransB: true, Bias: a(dt, 768), Beta: 1, Act: kernels.ActGELU})
			},
			func() error {
				return b.MatMul(out, x, w, kernels.MatMulParams{TransB: true, Bias: y, Act: kernels.ActTanh})
			},
			func() error { // a decode step's projection: one row, added to the residual
				return b.MatMul(a(dt, 1, 64), a(dt, 1, 256), a(dt, 64, 256), kernels.MatMulParams{TransB: true, Beta: 1})
			},
			func() error { // a decode step's query, key and value in one launch (16-bit)
				return b.MatMulShared([]*kernels.Tensor{a(dt, 1, 64), a(dt, 1, 16), a(dt, 1, 16)}, a(dt, 1, 256),
					[]*kernels.Tensor{a(dt, 64, 256), a(dt, 16, 256), a(dt, 16, 256)})
			},
			func() error { // gate and up of three rows
				return b.MatMulShared([]*kernels.Tensor{a(dt, 3, 40), a(dt, 3, 40)}, a(dt, 3, 64), []*kernels.Tensor{a(dt, 40, 64), a(dt, 40, 64)})
			},
			func() error { // five rows: one product at a time
				return b.MatMulShared([]*kernels.Tensor{a(dt, 5, 40), a(dt, 5, 40)}, a(dt, 5, 64), []*kernels.Tensor{a(dt, 40, 64), a(dt, 40, 64)})
			},
			func() error { // eight sequences' decode step as a batch sharing the weight
				return b.MatMul(a(dt, 2, 4, 64), a(dt, 2, 4, 256), a(dt, 64, 256), kernels.MatMulParams{TransB: true, Bias: y})
			},
			func() error { return b.SwapAxes(a(dt, 2, 8, 4, 64), q) },
			func() error { return b.SwapAxes(a(dt, 2, 5, 3, 3), a(dt, 2, 3, 5, 3)) }, // rows of 6 or 12 bytes
			func() error { return b.Attention(q, q, kv, kv, kernels.AttentionParams{Causal: true, KeyLens: lens}) },
			func() error { return b.Attention(q128, q128, kv128, kv128, kernels.AttentionParams{}) },
			func() error { // BERT's fused projection: 4 query, key and value heads of 64
				return b.AttentionPacked(a(dt, 2, 8, 4, 64), a(dt, 2, 8, 12, 64), kernels.AttentionParams{KeyLens: lens})
			},
			func() error { // grouped KV heads of 128, causal
				return b.AttentionPacked(a(dt, 1, 8, 4, 128), a(dt, 1, 8, 8, 128), kernels.AttentionParams{Causal: true})
			},
			func() error {
				return b.AttentionBackward(dq, dk, dv, dq, q, kv, kv, kernels.AttentionParams{KeyLens: lens})
			},
			func() error { return b.RoPE(a(dt, 2, 3, 4, 64), a(i32, 2, 3), a(f32, 32)) },
			func() error { return b.SwiGLU(out, out, x) },
			func() error { return b.CacheWrite(kv, a(dt, 2, 3, 2, 64), lens) },
			func() error { return b.CachedAttention(a(dt, 2, 4, 1, 64), a(dt, 2, 4, 1, 64), kv, kv, lens, 0) },
			func() error { return b.CachedAttention(q, q, kv, kv, lens, 0.1) },
			func() error { return b.PagedCacheWrite(pool, a(dt, 2, 3, 2, 64), table, lens) },
			func() error {
				return b.PagedAttention(a(dt, 2, 4, 1, 64), a(dt, 2, 4, 1, 64), pool, pool, table, lens, 0)
			},
			func() error { return b.PagedAttention(q, q, pool, pool, table, lens, 0.1) },
			func() error { return b.Argmax(a(i32, 4), x) },
		}
		for i, op := range ops {
			require.NoError(t, op(), "%v op %d", dt, i)
		}
	}
	for _, dt := range []kernels.DType{kernels.I8, kernels.I32} {
		require.NoError(t, b.Fill(a(dt, 9), 3))
	}
	require.NoError(t, b.SwapAxes(a(i32, 1, 3, 2, 2), a(i32, 1, 2, 3, 2))) // rows of 8 bytes
	p := a(f32, 3, 7)
	hp := kernels.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3}
	require.NoError(t, b.AdamW(p, a(f32, 3, 7), a(f32, 3, 7), a(f32, 3, 7), hp))
	require.NoError(t, b.AdamWAll([]kernels.AdamWParam{
		{Param: a(f32, 3, 7), Grad: a(f32, 3, 7), M: a(f32, 3, 7), V: a(f32, 3, 7)},
		{Param: a(f32, 5000), Grad: a(kernels.BF16, 5000), M: a(f32, 5000), V: a(f32, 5000), Copy: a(kernels.BF16, 5000), NoDecay: true},
	}, hp))
	dryVision(t, b)
	dryQuant(t, b)
	dryQuantConv(t, b)
	dryWeightQuant(t, b)
}

// ptxParams maps each kernel of a PTX image to its parameter types
// (".u64", ".f32", ".b8[128]" …).
var (
	ptxEntryParams = regexp.MustCompile(`(?s)\.entry (\w+)\((.*?)\)`)
	ptxParam       = regexp.MustCompile(`\.param (?:\.align \d+ )?(\.\w+) \w+(\[\d+\])?`)
)

func ptxParams(t *testing.T, target string) map[string][]string {
	files, err := images.ReadDir("ptx")
	require.NoError(t, err)
	out := map[string][]string{}
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), "."+target+".ptx") {
			continue
		}
		img, err := images.ReadFile(path.Join("ptx", f.Name()))
		require.NoError(t, err)
		for _, m := range ptxEntryParams.FindAllStringSubmatch(string(img), -1) {
			var types []string
			for _, p := range ptxParam.FindAllStringSubmatch(m[2], -1) {
				types = append(types, p[1]+p[2])
			}
			out[m[1]] = types
		}
	}
	require.NotEmpty(t, out, "no PTX for %s", target)
	return out
}

// goParam is the PTX parameter type that a launch argument fills.
func goParam(v any) []string {
	switch v.(type) {
	case devptr, int64:
		return []string{".u64", ".s64", ".b64"}
	case int32:
		return []string{".u32", ".s32", ".b32"}
	case float32:
		return []string{".f32"}
	case tensorMap:
		return []string{".b8[128]"}
	}
	return nil
}

// TestLaunchSignatures runs every operation on dry-run backends of each
// image target and checks every launch against the kernel's parameters in
// the PTX: the kernel exists, and the arguments agree in number, size and
// kind (integer or float), and the launch fits the hardware's limits.
// The sm_90a cubins have the same kernels as the compute_80 PTX (checked
// by TestImages), so their signatures are read from it.
func TestLaunchSignatures(t *testing.T) {
	for _, c := range []struct {
		cc    [2]int
		flash string // FlashEnv's value
	}{{[2]int{7, 5}, ""}, {[2]int{8, 0}, "wgmma"}, {[2]int{9, 0}, ""}, {[2]int{9, 0}, "wgmma"}} {
		cc := c.cc
		t.Run(fmt.Sprintf("cc=%d.%d/flash=%s", cc[0], cc[1], c.flash), func(t *testing.T) {
			var recs []launchRec
			b := dryRun(cc[0], cc[1], &recs)
			b.info.Attention = flashKind(cc[0], cc[1], c.flash)
			dryOps(t, b)
			target := imageTarget(cc[0], cc[1])
			if target == "sm_90a" {
				target = "compute_80"
			}
			params := ptxParams(t, target)
			seen := map[string]bool{}
			for _, r := range recs {
				seen[r.name] = true
				want, ok := params[r.name]
				if !assert.True(t, ok, "launch of %s, which the %s image lacks", r.name, target) {
					continue
				}
				if !assert.Len(t, r.args, len(want), "%s: arguments %v, parameters %v", r.name, r.args, want) {
					continue
				}
				for i, arg := range r.args {
					assert.Contains(t, goParam(arg), want[i], "%s argument %d: Go %T for PTX %s", r.name, i, arg, want[i])
				}
				threads := r.block.x * r.block.y * r.block.z
				assert.LessOrEqual(t, threads, 1024, r.name)
				assert.LessOrEqual(t, r.grid.y, 65535, r.name)
				assert.LessOrEqual(t, r.grid.z, 65535, r.name)
				assert.LessOrEqual(t, r.smem, 227<<10, r.name)
			}
			// The paths each target must take.
			must := []string{"matmul_f32", "matmul_splitk_f32", "splitk_reduce_f32", "cast", "check_range", "softmax_f16", "embedding_backward_bf16", "layernorm_param_grads_f32",
				"swap_axes_u16", "swap_axes_u32", "swap_axes_u64", "swap_axes_u128", "split_heads_u128", "adamw_f32", "adamw_all",
				"rope_bf16", "swiglu_f16", "cache_write_f32", "attn_decode_partial_bf16", "attn_decode_combine_f16", "argmax_f32",
				"matmul_gemv1_f16", "matmul_gemv4_bf16", "matmul_gemv8_f16", "matmul_gemv1_bf16",
				"matmul_gemv1_shared_f16", "matmul_gemv4_shared_bf16"}
			must = append(must, visionMust(cc[0])...)
			must = append(must, quantMust(cc[0])...)
			must = append(must, quantConvMust(cc[0])...)
			must = append(must, weightQuantMust(cc[0])...)
			switch cc[0] {
			case 8:
				must = append(must, "matmul_tc_f16", "matmul_tc_bf16", "matmul_tf32")
			case 9:
				must = append(must, "matmul_sm90_f16", "matmul_sm90_bf16", "splitk_reduce_f16", "splitk_reduce_bf16", "matmul_sm90_tf32", "transpose_u32")
			}
			switch b.info.Attention {
			case "mma":
				must = append(must, "flash_attn_fwd_f16_d64", "flash_attn_fwd_bf16_d64", "flash_attn_fwd_f16_d128", "flash_attn_fwd_bf16_d128")
			case "wgmma":
				must = append(must, "flash_attn_sm90_f16_d64", "flash_attn_sm90_bf16_d64", "flash_attn_sm90_f16_d128", "flash_attn_sm90_bf16_d128")
			}
			if b.info.Attention != "mma" {
				for _, r := range recs {
					assert.NotContains(t, r.name, "flash_attn_fwd", "the mma.sync kernel where %q attention runs", b.info.Attention)
				}
			}
			for _, name := range must {
				assert.True(t, seen[name], "no launch of %s on %s", name, target)
			}
		})
	}
}
