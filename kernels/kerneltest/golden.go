package kerneltest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/internal/golden"
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
)

// GoldenFiles are the golden files of kernel cases in testdata/golden,
// written by testdata/reference/kernels.py (regenerate with
// /usr/bin/python3 testdata/reference/kernels.py). vision.safetensors is
// in torch's layout (NCHW images, [Co, Ci/G, Kh, Kw] filters), which the
// runner moves to the ops' NHWC.
var GoldenFiles = []string{"kernels", "decoder", "vision"}

// RunGolden runs every case of GoldenFiles on b, one subtest per file and
// case, and compares each output with the PyTorch reference: exactly for
// the ops that move data or return indices, within the case dtype's
// kernels.Tolerance otherwise. A case whose op group b lacks is skipped
// with kernels.Group's error.
//
// A backend's test is one line:
//
//	func TestGolden(t *testing.T) { kerneltest.RunGolden(t, cpu.New()) }
func RunGolden(t *testing.T, b kernels.Backend) {
	for _, file := range GoldenFiles {
		t.Run(file, func(t *testing.T) {
			f, err := golden.Open(file)
			require.NoError(t, err)
			require.NotEmpty(t, f.Names())
			t.Logf("%d golden cases from %s", len(f.Names()), f.Metadata()["reference"])
			for _, name := range f.Names() {
				t.Run(name, func(t *testing.T) { runGolden(t, b, f.File, name) })
			}
		})
	}
}

// runGolden runs the case name of f on b and checks its outputs.
func runGolden(t *testing.T, b kernels.Backend, f *safetensors.File, name string) {
	c, err := loadGoldenCase(f, name)
	require.NoError(t, err)
	spec := goldenOps[c.Params.Op]
	op, err := spec.bind(b)
	if err != nil {
		t.Skip(err.Error())
	}
	got, err := runGoldenCase(b, op, c)
	if errors.Is(err, kernels.ErrUnsupported) {
		t.Fatalf("case %s on %s: op %s is not implemented: %v", name, b.Name(), c.Params.Op, err)
	}
	require.NoError(t, err, "case %s on %s", name, b.Name())
	tol := kernels.Tolerance(c.DType)
	if spec.exact {
		tol = 0
	}
	for _, role := range spec.outputs {
		want := c.Outputs[role]
		if err := golden.Compare(got[role], want.Values(), tol); err != nil {
			t.Errorf("case %s on %s: output %s (%v%v, case dtype %v): %v",
				name, b.Name(), role, c.roleDType(role), want.Shape, c.DType, err)
		}
	}
}

// goldenParams are the parameters of a golden case, from its metadata
// JSON. Which keys an op takes is listed in its goldenOp.
type goldenParams struct {
	Op          string          `json:"op"`
	DType       string          `json:"dtype"`
	TransA      bool            `json:"trans_a"`
	TransB      bool            `json:"trans_b"`
	Alpha       float32         `json:"alpha"`
	Beta        float32         `json:"beta"`
	Bias        bool            `json:"bias"`
	Act         string          `json:"act"`
	S           float32         `json:"s"`
	Eps         float32         `json:"eps"`
	HasBeta     bool            `json:"has_beta"`
	Scale       float32         `json:"scale"`
	Causal      bool            `json:"causal"`
	HasKeyLens  bool            `json:"keylens"`
	LR          float32         `json:"lr"`
	Beta1       float32         `json:"beta1"`
	Beta2       float32         `json:"beta2"`
	WeightDecay float32         `json:"weight_decay"`
	Step        int             `json:"step"`
	RopeTheta   float64         `json:"rope_theta"`   // how inv_freq was made (the op reads only the tensor)
	RopeScaling json.RawMessage `json:"rope_scaling"` // likewise
	Stride      [2]int          `json:"stride"`
	Padding     [2]int          `json:"padding"`
	Dilation    [2]int          `json:"dilation"`
	Groups      int             `json:"groups"`
	Kernel      [2]int          `json:"kernel"`
	NaN         string          `json:"nan"` // how the reference treats NaN, for the record
}

// goldenCase is a loaded golden case: its parameters, its inputs (in the
// case's dtype, or I32, or F32 for the roles that are F32 whatever the
// dtype) and its expected outputs (F32 computed in float64, or I32
// indices), NHWC where the file is NCHW.
type goldenCase struct {
	Name    string
	Params  goldenParams
	DType   kernels.DType // the case's dtype: F32, F16 or BF16 (or one of the op's dtypes)
	Act     kernels.Activation
	Inputs  map[string]golden.Role
	Outputs map[string]golden.Role
}

// tensors are a case's tensors on the backend, by role.
type tensors map[string]*kernels.Tensor

// boundOp is a golden op bound to a backend's op group.
type boundOp func(t tensors, c *goldenCase) error

// goldenOp describes how a golden case of one op is laid out and run.
type goldenOp struct {
	params    []string        // keys besides op and dtype
	extraKeys []string        // keys a case may hold besides params
	dtypes    []kernels.DType // the case dtypes it takes; nil means F32, F16 and BF16
	inputs    []string        // roles always present
	// roles are the optional input roles: present exactly when the
	// predicate holds, or when the file holds them where it is nil.
	roles   map[string]func(goldenParams) bool
	outputs []string
	// intOutputs are the outputs that are I32 indices.
	intOutputs []string
	// initial maps an output to the input holding its value before the op,
	// for ops that read or update their outputs (MatMul with beta ≠ 0,
	// AdamW, RoPE in place, CacheWrite): the output starts as that input,
	// which is not uploaded otherwise. An input that is absent leaves the
	// output uninitialised.
	initial map[string]string
	// exact is set for ops that move data or return indices: their
	// outputs must equal the reference exactly, whatever the dtype.
	exact bool
	// nchw is set for ops whose file holds torch's NCHW layout: every
	// input but bias is moved to NHWC, and outputs that have 4 dimensions.
	nchw  bool
	check func(s roleShapes, p goldenParams) error // shape relations between roles, or nil
	// bind looks up the op's group on a backend (kernels.Group) and
	// returns the op on it, or the lookup's error.
	bind func(kernels.Backend) (boundOp, error)
}

// on binds run, an op of group G, to a backend's G.
func on[G any](run func(g G, t tensors, c *goldenCase) error) func(kernels.Backend) (boundOp, error) {
	return func(b kernels.Backend) (boundOp, error) {
		g, err := kernels.Group[G](b)
		if err != nil {
			return nil, err
		}
		return func(t tensors, c *goldenCase) error { return run(g, t, c) }, nil
	}
}

// goldenFloatTypes are the case dtypes of an op whose goldenOp lists none.
var goldenFloatTypes = []kernels.DType{kernels.F32, kernels.F16, kernels.BF16}

// intRoles are stored and uploaded as I32; f32Roles are F32 whatever the
// case's dtype; every other role has the case's dtype on the device.
var (
	intRoles = map[string]bool{"ids": true, "targets": true, "keylens": true, "pos": true, "start": true, "lens": true}
	f32Roles = map[string]bool{"mean": true, "rstd": true, "loss": true, "inv_freq": true}
)

// roleDType is the dtype of a role of case c on the device, and in the
// file for inputs and integer outputs.
func (c *goldenCase) roleDType(role string) kernels.DType {
	switch {
	case intRoles[role], slices.Contains(goldenOps[c.Params.Op].intOutputs, role):
		return kernels.I32
	case f32Roles[role]:
		return kernels.F32
	}
	return c.DType
}

// activation parses the reference's name of an activation.
func activation(s string) (kernels.Activation, error) {
	for a := kernels.ActNone; a <= kernels.ActTanh; a++ {
		if a.String() == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("unknown activation %q", s)
}

func hasKeyLens(p goldenParams) bool { return p.HasKeyLens }

func attnParams(t tensors, p goldenParams) kernels.AttentionParams {
	return kernels.AttentionParams{Scale: p.Scale, Causal: p.Causal, KeyLens: t["keylens"]}
}

// goldenOps lists every op the golden files may hold; a case of any other
// op fails.
var goldenOps = map[string]goldenOp{
	"matmul": {
		params: []string{"trans_a", "trans_b", "alpha", "beta", "bias", "act"},
		inputs: []string{"a", "b"},
		roles: map[string]func(goldenParams) bool{
			"c":    func(p goldenParams) bool { return p.Beta != 0 },
			"bias": func(p goldenParams) bool { return p.Bias },
		},
		outputs: []string{"out"},
		initial: map[string]string{"out": "c"},
		check:   checkMatMulShapes,
		bind: on(func(b kernels.Backend, t tensors, c *goldenCase) error {
			p := c.Params
			return b.MatMul(t["out"], t["a"], t["b"], kernels.MatMulParams{
				TransA: p.TransA, TransB: p.TransB, Alpha: p.Alpha, Beta: p.Beta, Bias: t["bias"], Act: c.Act,
			})
		}),
	},
	"add": {
		inputs: []string{"a", "b"}, outputs: []string{"out"},
		check: func(s roleShapes, _ goldenParams) error {
			a, b := s["a"], s["b"]
			if len(b) > len(a) || !a[len(a)-len(b):].Equal(b) {
				return fmt.Errorf("b has shape %v, want a suffix of a's %v", b, a)
			}
			return s.want("out", a)
		},
		bind: on(func(b kernels.Backend, t tensors, _ *goldenCase) error {
			return b.Add(t["out"], t["a"], t["b"])
		}),
	},
	"scale": {
		params: []string{"s"}, inputs: []string{"x"}, outputs: []string{"out"},
		check: func(s roleShapes, _ goldenParams) error { return s.want("out", s["x"]) },
		bind: on(func(b kernels.Backend, t tensors, c *goldenCase) error {
			return b.Scale(t["out"], t["x"], c.Params.S)
		}),
	},
	"act": {
		params: []string{"act"}, inputs: []string{"x"}, outputs: []string{"out"},
		check: func(s roleShapes, _ goldenParams) error { return s.want("out", s["x"]) },
		bind: on(func(b kernels.Backend, t tensors, c *goldenCase) error {
			return b.Act(t["out"], t["x"], c.Act)
		}),
	},
	"act_backward": {
		params: []string{"act"}, inputs: []string{"dy", "x"}, outputs: []string{"dx"},
		check: func(s roleShapes, _ goldenParams) error { return s.want("dy", s["x"], "dx", s["x"]) },
		bind: on(func(b kernels.Backend, t tensors, c *goldenCase) error {
			return b.ActBackward(t["dx"], t["dy"], t["x"], c.Act)
		}),
	},
	"sumrows": {
		inputs: []string{"x"}, outputs: []string{"out"},
		check: func(s roleShapes, _ goldenParams) error { return s.want("out", kernels.Shape{s["x"].Last()}) },
		bind: on(func(b kernels.Backend, t tensors, _ *goldenCase) error {
			return b.SumRows(t["out"], t["x"])
		}),
	},
	"layernorm": {
		params:  []string{"eps", "has_beta"},
		inputs:  []string{"x", "gamma"},
		roles:   map[string]func(goldenParams) bool{"beta": func(p goldenParams) bool { return p.HasBeta }},
		outputs: []string{"out", "mean", "rstd"},
		check: func(s roleShapes, p goldenParams) error {
			x := s["x"]
			d, rows := kernels.Shape{x.Last()}, kernels.Shape{x.Rows()}
			if p.HasBeta {
				if err := s.want("beta", d); err != nil {
					return err
				}
			}
			return s.want("gamma", d, "out", x, "mean", rows, "rstd", rows)
		},
		bind: on(func(b kernels.Backend, t tensors, c *goldenCase) error {
			return b.LayerNorm(t["out"], t["mean"], t["rstd"], t["x"], t["gamma"], t["beta"], c.Params.Eps)
		}),
	},
	"layernorm_backward": {
		params:  []string{"eps"}, // documents the forward; the statistics carry it
		inputs:  []string{"dy", "x", "gamma", "mean", "rstd"},
		outputs: []string{"dx", "dgamma", "dbeta"},
		check: func(s roleShapes, _ goldenParams) error {
			x := s["x"]
			d, rows := kernels.Shape{x.Last()}, kernels.Shape{x.Rows()}
			return s.want("dy", x, "gamma", d, "mean", rows, "rstd", rows, "dx", x, "dgamma", d, "dbeta", d)
		},
		bind: on(func(b kernels.Backend, t tensors, _ *goldenCase) error {
			return b.LayerNormBackward(t["dx"], t["dgamma"], t["dbeta"], t["dy"], t["x"], t["gamma"], t["mean"], t["rstd"])
		}),
	},
	"rmsnorm": {
		params: []string{"eps"}, inputs: []string{"x", "gamma"}, outputs: []string{"out"},
		check: func(s roleShapes, _ goldenParams) error {
			return s.want("gamma", kernels.Shape{s["x"].Last()}, "out", s["x"])
		},
		bind: on(func(b kernels.Backend, t tensors, c *goldenCase) error {
			return b.RMSNorm(t["out"], t["x"], t["gamma"], c.Params.Eps)
		}),
	},
	"softmax": {
		params:  []string{"scale", "causal", "keylens"},
		inputs:  []string{"x"},
		roles:   map[string]func(goldenParams) bool{"keylens": hasKeyLens},
		outputs: []string{"out"},
		check: func(s roleShapes, p goldenParams) error {
			x := s["x"]
			if (p.Causal || p.HasKeyLens) && len(x) < 3 {
				return fmt.Errorf("x has shape %v, want [B, …, Sq, Sk] with a mask", x)
			}
			if p.HasKeyLens {
				if err := s.want("keylens", kernels.Shape{x[0]}); err != nil {
					return err
				}
			}
			return s.want("out", x)
		},
		bind: on(func(b kernels.Backend, t tensors, c *goldenCase) error {
			return b.Softmax(t["out"], t["x"], attnParams(t, c.Params))
		}),
	},
	"softmax_backward": {
		inputs: []string{"dy", "y"}, outputs: []string{"dx"},
		check: func(s roleShapes, _ goldenParams) error { return s.want("dy", s["y"], "dx", s["y"]) },
		bind: on(func(b kernels.Backend, t tensors, _ *goldenCase) error {
			return b.SoftmaxBackward(t["dx"], t["dy"], t["y"])
		}),
	},
	"attention": {
		params:  []string{"scale", "causal", "keylens"},
		inputs:  []string{"q", "k", "v"},
		roles:   map[string]func(goldenParams) bool{"keylens": hasKeyLens},
		outputs: []string{"out"},
		check: func(s roleShapes, p goldenParams) error {
			if err := checkAttentionShapes(s, p); err != nil {
				return err
			}
			return s.want("out", s["q"])
		},
		bind: on(func(b kernels.Backend, t tensors, c *goldenCase) error {
			return b.Attention(t["out"], t["q"], t["k"], t["v"], attnParams(t, c.Params))
		}),
	},
	"attention_backward": {
		params:  []string{"scale", "causal", "keylens"},
		inputs:  []string{"dy", "q", "k", "v"},
		roles:   map[string]func(goldenParams) bool{"keylens": hasKeyLens},
		outputs: []string{"dq", "dk", "dv"},
		check: func(s roleShapes, p goldenParams) error {
			if err := checkAttentionShapes(s, p); err != nil {
				return err
			}
			return s.want("dy", s["q"], "dq", s["q"], "dk", s["k"], "dv", s["v"])
		},
		bind: on(func(b kernels.Backend, t tensors, c *goldenCase) error {
			return b.AttentionBackward(t["dq"], t["dk"], t["dv"], t["dy"], t["q"], t["k"], t["v"], attnParams(t, c.Params))
		}),
	},
	"embedding": {
		inputs: []string{"table", "ids"}, outputs: []string{"out"},
		check: func(s roleShapes, _ goldenParams) error {
			if len(s["table"]) != 2 {
				return fmt.Errorf("table has shape %v, want [V, D]", s["table"])
			}
			return s.want("out", append(slices.Clone(s["ids"]), s["table"][1]))
		},
		bind: on(func(b kernels.Backend, t tensors, _ *goldenCase) error {
			return b.Embedding(t["out"], t["table"], t["ids"])
		}),
	},
	"embedding_backward": {
		inputs: []string{"dy", "ids"}, outputs: []string{"dtable"},
		check: func(s roleShapes, _ goldenParams) error {
			if len(s["dtable"]) != 2 {
				return fmt.Errorf("dtable has shape %v, want [V, D]", s["dtable"])
			}
			return s.want("dy", append(slices.Clone(s["ids"]), s["dtable"][1]))
		},
		bind: on(func(b kernels.Backend, t tensors, _ *goldenCase) error {
			return b.EmbeddingBackward(t["dtable"], t["dy"], t["ids"])
		}),
	},
	"cross_entropy": {
		inputs: []string{"logits", "targets"}, outputs: []string{"loss"},
		check: checkCrossEntropyShapes("loss"),
		bind: on(func(b kernels.Backend, t tensors, _ *goldenCase) error {
			return b.CrossEntropy(t["loss"], t["logits"], t["targets"])
		}),
	},
	"cross_entropy_backward": {
		params: []string{"scale"}, inputs: []string{"logits", "targets"}, outputs: []string{"dlogits"},
		check: checkCrossEntropyShapes("dlogits"),
		bind: on(func(b kernels.Backend, t tensors, c *goldenCase) error {
			return b.CrossEntropyBackward(t["dlogits"], t["logits"], t["targets"], c.Params.Scale)
		}),
	},
	"swap_axes": {
		dtypes: []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.I32},
		inputs: []string{"x"}, outputs: []string{"out"}, exact: true,
		check: func(s roleShapes, _ goldenParams) error {
			x := s["x"]
			if len(x) != 4 {
				return fmt.Errorf("x has shape %v, want [A, B, C, D]", x)
			}
			return s.want("out", kernels.Shape{x[0], x[2], x[1], x[3]})
		},
		bind: on(func(b kernels.Backend, t tensors, _ *goldenCase) error {
			return b.SwapAxes(t["out"], t["x"])
		}),
	},
	"adamw": {
		params:  []string{"lr", "beta1", "beta2", "eps", "weight_decay", "step"},
		dtypes:  []kernels.DType{kernels.F32},
		inputs:  []string{"param", "grad", "m", "v"},
		outputs: []string{"param_out", "m_out", "v_out"},
		initial: map[string]string{"param_out": "param", "m_out": "m", "v_out": "v"},
		check: func(s roleShapes, _ goldenParams) error {
			p := s["param"]
			return s.want("grad", p, "m", p, "v", p, "param_out", p, "m_out", p, "v_out", p)
		},
		bind: on(func(b kernels.Backend, t tensors, c *goldenCase) error {
			p := c.Params
			return b.AdamW(t["param_out"], t["grad"], t["m_out"], t["v_out"], kernels.AdamWParams{
				LR: p.LR, Beta1: p.Beta1, Beta2: p.Beta2, Eps: p.Eps, WeightDecay: p.WeightDecay, Step: p.Step,
			})
		}),
	},

	"rope": {
		params: []string{"rope_theta", "rope_scaling"},
		inputs: []string{"x", "pos", "inv_freq"}, outputs: []string{"out"},
		initial: map[string]string{"out": "x"},
		check: func(s roleShapes, _ goldenParams) error {
			x := s["x"]
			if len(x) != 4 || x[3]%2 != 0 {
				return fmt.Errorf("x has shape %v, want [B, S, H, D] with D even", x)
			}
			return s.want("pos", kernels.Shape{x[0], x[1]}, "inv_freq", kernels.Shape{x[3] / 2}, "out", x)
		},
		bind: on(func(d kernels.Decoder, t tensors, _ *goldenCase) error {
			return d.RoPE(t["out"], t["pos"], t["inv_freq"])
		}),
	},
	"swiglu": {
		inputs: []string{"gate", "up"}, outputs: []string{"out"},
		check: func(s roleShapes, _ goldenParams) error { return s.want("up", s["gate"], "out", s["gate"]) },
		bind: on(func(d kernels.Decoder, t tensors, _ *goldenCase) error {
			return d.SwiGLU(t["out"], t["gate"], t["up"])
		}),
	},
	"cache_write": {
		inputs: []string{"cache", "x", "start"}, outputs: []string{"out"},
		initial: map[string]string{"out": "cache"}, exact: true,
		check: func(s roleShapes, _ goldenParams) error {
			c, x := s["cache"], s["x"]
			if len(c) != 4 || len(x) != 4 {
				return fmt.Errorf("cache %v and x %v, want [B, H, T, D] and [B, S, H, D]", c, x)
			}
			return s.want("x", kernels.Shape{c[0], x[1], c[1], c[3]}, "start", kernels.Shape{c[0]}, "out", c)
		},
		bind: on(func(d kernels.Decoder, t tensors, _ *goldenCase) error {
			return d.CacheWrite(t["out"], t["x"], t["start"])
		}),
	},
	"cached_attention": {
		params: []string{"scale"},
		inputs: []string{"q", "k", "v", "lens"}, outputs: []string{"out"},
		check: func(s roleShapes, _ goldenParams) error {
			q, k := s["q"], s["k"]
			if len(q) != 4 || len(k) != 4 || q[0] != k[0] || q[3] != k[3] || k[1] == 0 || q[1]%k[1] != 0 {
				return fmt.Errorf("q %v and k %v, want [B, Hq, Sq, D] and [B, Hkv, T, D] with Hkv dividing Hq", q, k)
			}
			return s.want("v", k, "lens", kernels.Shape{q[0]}, "out", q)
		},
		bind: on(func(d kernels.Decoder, t tensors, c *goldenCase) error {
			return d.CachedAttention(t["out"], t["q"], t["k"], t["v"], t["lens"], c.Params.Scale)
		}),
	},
	"argmax": {
		inputs: []string{"x"}, outputs: []string{"out"}, intOutputs: []string{"out"}, exact: true,
		check: func(s roleShapes, _ goldenParams) error {
			x := s["x"]
			if len(x) < 2 {
				return fmt.Errorf("x has shape %v, want [rows…, V]", x)
			}
			return s.want("out", x[:len(x)-1])
		},
		bind: on(func(d kernels.Decoder, t tensors, _ *goldenCase) error {
			return d.Argmax(t["out"], t["x"])
		}),
	},

	"conv2d": {
		params: []string{"stride", "padding", "dilation", "groups", "act"},
		inputs: []string{"x", "w"}, roles: map[string]func(goldenParams) bool{"bias": nil, "residual": nil},
		outputs: []string{"out"}, nchw: true,
		bind: on(func(v kernels.Vision, t tensors, c *goldenCase) error {
			p := c.Params
			return v.Conv2D(t["out"], t["x"], t["w"], kernels.ConvParams{Stride: p.Stride, Pad: p.Padding, Dilation: p.Dilation,
				Groups: p.Groups, Bias: t["bias"], Residual: t["residual"], Act: c.Act})
		}),
	},
	"max_pool2d": {
		params: []string{"kernel", "stride", "padding", "dilation"}, extraKeys: []string{"nan"},
		inputs: []string{"x"}, outputs: []string{"out"}, nchw: true,
		bind: on(func(v kernels.Vision, t tensors, c *goldenCase) error {
			p := c.Params
			return v.MaxPool2D(t["out"], t["x"], kernels.PoolParams{Kernel: p.Kernel, Stride: p.Stride, Pad: p.Padding, Dilation: p.Dilation})
		}),
	},
	"global_avg_pool": {
		inputs: []string{"x"}, outputs: []string{"out"}, nchw: true,
		bind: on(func(v kernels.Vision, t tensors, _ *goldenCase) error {
			return v.GlobalAvgPool(t["out"], t["x"])
		}),
	},
}

// roleShapes maps a case's roles to their shapes.
type roleShapes map[string]kernels.Shape

// want checks role/shape pairs in order and reports the first mismatch.
func (s roleShapes) want(pairs ...any) error {
	for i := 0; i < len(pairs); i += 2 {
		role, want := pairs[i].(string), pairs[i+1].(kernels.Shape)
		if !s[role].Equal(want) {
			return fmt.Errorf("%s has shape %v, want %v", role, s[role], want)
		}
	}
	return nil
}

func checkMatMulShapes(s roleShapes, p goldenParams) error {
	a, b := s["a"], s["b"]
	if len(a) < 2 {
		return fmt.Errorf("a has shape %v, want at least 2 dimensions", a)
	}
	if len(b) != 2 && len(b) != len(a) {
		return fmt.Errorf("b has shape %v, want 2 dimensions or as many as a's %v", b, a)
	}
	batch := a[:len(a)-2]
	if len(b) == len(a) && !b[:len(b)-2].Equal(batch) {
		return fmt.Errorf("b has shape %v, want batch dimensions %v as a's %v", b, batch, a)
	}
	m, k := a[len(a)-2], a[len(a)-1]
	if p.TransA {
		m, k = k, m
	}
	kb, n := b[len(b)-2], b[len(b)-1]
	if p.TransB {
		kb, n = n, kb
	}
	if k != kb {
		return fmt.Errorf("a %v and b %v (trans_a=%v, trans_b=%v) disagree on K: %d vs %d", a, b, p.TransA, p.TransB, k, kb)
	}
	out := append(slices.Clone(batch), m, n)
	if p.Beta != 0 {
		if err := s.want("c", kernels.Shape(out)); err != nil {
			return err
		}
	}
	if p.Bias {
		if err := s.want("bias", kernels.Shape{n}); err != nil {
			return err
		}
	}
	return s.want("out", kernels.Shape(out))
}

func checkAttentionShapes(s roleShapes, p goldenParams) error {
	q, k := s["q"], s["k"]
	if len(q) != 4 || len(k) != 4 {
		return fmt.Errorf("q %v and k %v must be [B, H, S, D]", q, k)
	}
	if k[0] != q[0] || k[3] != q[3] || k[1] == 0 || q[1]%k[1] != 0 {
		return fmt.Errorf("k has shape %v, want [%d, a divisor of %d, Sk, %d] for q %v", k, q[0], q[1], q[3], q)
	}
	if p.HasKeyLens {
		if err := s.want("keylens", kernels.Shape{q[0]}); err != nil {
			return err
		}
	}
	return s.want("v", k)
}

func checkCrossEntropyShapes(out string) func(roleShapes, goldenParams) error {
	return func(s roleShapes, _ goldenParams) error {
		l := s["logits"]
		if len(l) != 2 {
			return fmt.Errorf("logits has shape %v, want [N, V]", l)
		}
		want := l
		if out == "loss" {
			want = kernels.Shape{l[0]}
		}
		return s.want("targets", kernels.Shape{l[0]}, out, want)
	}
}

// nchwToNHWC moves the channels of r [N, C, H, W] innermost.
func nchwToNHWC(r golden.Role) golden.Role {
	s := r.Shape
	n, c, h, w := s[0], s[1], s[2], s[3]
	out := make([]float32, len(r.F32))
	for i := range n {
		for ch := range c {
			for p := range h * w {
				out[(i*h*w+p)*c+ch] = r.F32[(i*c+ch)*h*w+p]
			}
		}
	}
	return golden.Role{Shape: kernels.Shape{n, h, w, c}, DType: r.DType, F32: out}
}

// loadGoldenCase reads and checks the case name of a golden file: its
// parameters (exactly the keys its op takes), that it holds exactly the
// roles its op calls for, with the dtypes and shapes that the op's
// documentation implies.
func loadGoldenCase(f *safetensors.File, name string) (*goldenCase, error) {
	fail := func(format string, args ...any) (*goldenCase, error) {
		return nil, fmt.Errorf("golden case %q: %w", name, fmt.Errorf(format, args...))
	}
	c := &goldenCase{Name: name, Inputs: map[string]golden.Role{}, Outputs: map[string]golden.Role{}}
	raw, keys, err := golden.ReadParams(f, name, &c.Params)
	if err != nil {
		return fail("%w", err)
	}
	p := c.Params
	spec, ok := goldenOps[p.Op]
	if !ok {
		return fail("unknown op %q: add it to the goldenOps table of kernels/kerneltest/golden.go", p.Op)
	}
	params := spec.params
	for _, k := range spec.extraKeys {
		if _, ok := keys[k]; ok {
			params = append(slices.Clone(params), k)
		}
	}
	if err := golden.CheckKeys(raw, p.Op, keys, params); err != nil {
		return fail("%w", err)
	}
	dtypes := spec.dtypes
	if dtypes == nil {
		dtypes = goldenFloatTypes
	}
	dt, err := kernels.ParseDType(p.DType)
	if err != nil || !slices.Contains(dtypes, dt) {
		return fail("dtype %q, want one of %v for op %s", p.DType, dtypes, p.Op)
	}
	c.DType = dt
	if slices.Contains(spec.params, "act") {
		if c.Act, err = activation(p.Act); err != nil {
			return fail("%w", err)
		}
	}

	inputs := slices.Clone(spec.inputs)
	for _, role := range slices.Sorted(maps.Keys(spec.roles)) {
		if present := spec.roles[role]; present == nil && slices.Contains(f.Tensors(), name+"/"+role) || present != nil && present(p) {
			inputs = append(inputs, role)
		}
	}
	if err := golden.CheckRoles(f, name, p.Op+" with these parameters", append(slices.Clone(inputs), spec.outputs...)); err != nil {
		return fail("%w", err)
	}
	s := roleShapes{}
	for _, role := range inputs {
		r, err := golden.ReadRole(f, name, role, c.roleDType(role))
		if err != nil {
			return fail("%w", err)
		}
		if spec.nchw && role != "bias" {
			if len(r.Shape) != 4 {
				return fail("%s has shape %v, want 4 dimensions (NCHW)", role, r.Shape)
			}
			r = nchwToNHWC(r)
		}
		c.Inputs[role], s[role] = r, r.Shape
	}
	for _, role := range spec.outputs {
		want := kernels.F32 // expected values, computed in float64
		if intRoles[role] || slices.Contains(spec.intOutputs, role) {
			want = kernels.I32
		}
		r, err := golden.ReadRole(f, name, role, want)
		if err != nil {
			return fail("%w", err)
		}
		if spec.nchw && len(r.Shape) == 4 {
			r = nchwToNHWC(r)
		}
		c.Outputs[role], s[role] = r, r.Shape
	}
	if spec.check != nil {
		if err := spec.check(s, p); err != nil {
			return fail("%w", err)
		}
	}
	return c, nil
}

// upload copies a role's values to b in dtype dt.
func upload(b kernels.Backend, r golden.Role, dt kernels.DType) (*kernels.Tensor, error) {
	if dt == kernels.I32 {
		return kernels.FromInt32(b, r.I32, r.Shape...)
	}
	return kernels.FromFloat32(b, dt, r.F32, r.Shape...)
}

// runGoldenCase uploads the case's inputs to b, runs op and returns every
// output downloaded (float outputs widened from the device's dtype, I32
// outputs as float64 indices). All tensors are freed.
func runGoldenCase(b kernels.Backend, op boundOp, c *goldenCase) (got map[string][]float64, err error) {
	spec := goldenOps[c.Params.Op]
	t := tensors{}
	defer func() {
		for _, x := range t {
			if ferr := b.Free(x); ferr != nil && err == nil {
				err = fmt.Errorf("free: %w", ferr)
			}
		}
	}()
	initial := map[string]bool{} // inputs that are only the initial values of outputs
	for _, in := range spec.initial {
		initial[in] = true
	}
	for role, r := range c.Inputs {
		if initial[role] {
			continue
		}
		if t[role], err = upload(b, r, c.roleDType(role)); err != nil {
			return nil, fmt.Errorf("upload %s: %w", role, err)
		}
	}
	for _, role := range spec.outputs {
		dt := c.roleDType(role)
		if init, ok := c.Inputs[spec.initial[role]]; ok {
			t[role], err = upload(b, init, dt)
		} else {
			t[role], err = b.Alloc(dt, c.Outputs[role].Shape...)
		}
		if err != nil {
			return nil, fmt.Errorf("allocate %s: %w", role, err)
		}
	}
	if err := op(t, c); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Params.Op, err)
	}
	if err := b.Sync(); err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	got = map[string][]float64{}
	for _, role := range spec.outputs {
		if c.roleDType(role) == kernels.I32 {
			v, err := kernels.ToInt32(t[role])
			if err != nil {
				return nil, fmt.Errorf("download %s: %w", role, err)
			}
			got[role] = golden.Role{DType: kernels.I32, I32: v}.Values()
			continue
		}
		v, err := kernels.ToFloat32(t[role])
		if err != nil {
			return nil, fmt.Errorf("download %s: %w", role, err)
		}
		got[role] = golden.Widen(v)
	}
	return got, nil
}
