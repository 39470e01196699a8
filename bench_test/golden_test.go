package bench_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/internal/golden"
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
)

// goldenPath is the file written by testdata/reference/kernels.py
// (regenerate with: /usr/bin/python3 testdata/reference/kernels.py).
const goldenPath = "../testdata/golden/kernels.safetensors"

// caseParams are the parameters of a golden case, from its metadata JSON.
// Which keys an op takes is listed in its goldenOp.
type caseParams struct {
	Op          string  `json:"op"`
	DType       string  `json:"dtype"`
	TransA      bool    `json:"trans_a"`
	TransB      bool    `json:"trans_b"`
	Alpha       float32 `json:"alpha"`
	Beta        float32 `json:"beta"`
	Bias        bool    `json:"bias"`
	Act         string  `json:"act"`
	S           float32 `json:"s"`
	Eps         float32 `json:"eps"`
	HasBeta     bool    `json:"has_beta"`
	Scale       float32 `json:"scale"`
	Causal      bool    `json:"causal"`
	HasKeyLens  bool    `json:"keylens"`
	LR          float32 `json:"lr"`
	Beta1       float32 `json:"beta1"`
	Beta2       float32 `json:"beta2"`
	WeightDecay float32 `json:"weight_decay"`
	Step        int     `json:"step"`
}

// roleData is one role of a case as stored in the golden file.
type roleData struct {
	Shape kernels.Shape
	DType kernels.DType // storage dtype in the file
	F32   []float32     // float roles
	I32   []int32       // I32 roles
}

// caseData is a golden case: its parameters, its inputs (in the case's
// dtype) and its expected outputs (F32, computed in float64).
type caseData struct {
	Name    string
	Params  caseParams
	DType   kernels.DType // the case's dtype: F32, F16 or BF16 (or one of the op's dtypes)
	Act     kernels.Activation
	Inputs  map[string]roleData
	Outputs map[string]roleData
}

// goldenOp describes how a golden case of one op is laid out and run.
type goldenOp struct {
	params   []string                         // keys besides op and dtype
	dtypes   []kernels.DType                  // the case dtypes it takes; nil means F32, F16 and BF16
	inputs   []string                         // roles always present
	optional map[string]func(caseParams) bool // roles present exactly when the predicate holds
	outputs  []string
	// initial maps an output to the input holding its value before the op,
	// for ops that read or update their outputs (MatMul with beta ≠ 0,
	// AdamW): the output starts as that input, which is not uploaded
	// otherwise. An input that is absent leaves the output uninitialised.
	initial map[string]string
	// exact is set for ops that move data: their outputs must equal the
	// reference exactly, whatever the dtype.
	exact bool
	check func(s roleShapes, p caseParams) error // shape relations between roles
	run   func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error
}

// goldenFloatTypes are the case dtypes of an op whose goldenOp lists none.
var goldenFloatTypes = []kernels.DType{kernels.F32, kernels.F16, kernels.BF16}

// intRoles are stored and uploaded as I32; f32Roles are F32 whatever the
// case's dtype; every other role has the case's dtype on the device.
var (
	intRoles = map[string]bool{"ids": true, "targets": true, "keylens": true}
	f32Roles = map[string]bool{"mean": true, "rstd": true, "loss": true}
)

var goldenActs = map[string]kernels.Activation{
	"none": kernels.ActNone, "relu": kernels.ActReLU, "gelu": kernels.ActGELU,
	"gelu_tanh": kernels.ActGELUTanh, "silu": kernels.ActSiLU, "tanh": kernels.ActTanh,
}

func hasKeyLens(p caseParams) bool { return p.HasKeyLens }

func goldenAttnParams(t map[string]*kernels.Tensor, p caseParams) kernels.AttentionParams {
	return kernels.AttentionParams{Scale: p.Scale, Causal: p.Causal, KeyLens: t["keylens"]}
}

// goldenOps lists every op the golden file may hold; a case of any other op fails.
var goldenOps = map[string]goldenOp{
	"matmul": {
		params: []string{"trans_a", "trans_b", "alpha", "beta", "bias", "act"},
		inputs: []string{"a", "b"},
		optional: map[string]func(caseParams) bool{
			"c":    func(p caseParams) bool { return p.Beta != 0 },
			"bias": func(p caseParams) bool { return p.Bias },
		},
		outputs: []string{"out"},
		initial: map[string]string{"out": "c"},
		check:   checkMatMulShapes,
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error {
			p := c.Params
			return be.MatMul(t["out"], t["a"], t["b"], kernels.MatMulParams{
				TransA: p.TransA, TransB: p.TransB, Alpha: p.Alpha, Beta: p.Beta, Bias: t["bias"], Act: c.Act,
			})
		},
	},
	"add": {
		inputs: []string{"a", "b"}, outputs: []string{"out"},
		check: func(s roleShapes, _ caseParams) error {
			a, b := s["a"], s["b"]
			if len(b) > len(a) || !a[len(a)-len(b):].Equal(b) {
				return fmt.Errorf("b has shape %v, want a suffix of a's %v", b, a)
			}
			return s.want("out", a)
		},
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, _ *caseData) error {
			return be.Add(t["out"], t["a"], t["b"])
		},
	},
	"scale": {
		params: []string{"s"}, inputs: []string{"x"}, outputs: []string{"out"},
		check: func(s roleShapes, _ caseParams) error { return s.want("out", s["x"]) },
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error {
			return be.Scale(t["out"], t["x"], c.Params.S)
		},
	},
	"act": {
		params: []string{"act"}, inputs: []string{"x"}, outputs: []string{"out"},
		check: func(s roleShapes, _ caseParams) error { return s.want("out", s["x"]) },
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error {
			return be.Act(t["out"], t["x"], c.Act)
		},
	},
	"act_backward": {
		params: []string{"act"}, inputs: []string{"dy", "x"}, outputs: []string{"dx"},
		check: func(s roleShapes, _ caseParams) error { return s.want("dy", s["x"], "dx", s["x"]) },
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error {
			return be.ActBackward(t["dx"], t["dy"], t["x"], c.Act)
		},
	},
	"sumrows": {
		inputs: []string{"x"}, outputs: []string{"out"},
		check: func(s roleShapes, _ caseParams) error { return s.want("out", kernels.Shape{s["x"].Last()}) },
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, _ *caseData) error {
			return be.SumRows(t["out"], t["x"])
		},
	},
	"layernorm": {
		params:   []string{"eps", "has_beta"},
		inputs:   []string{"x", "gamma"},
		optional: map[string]func(caseParams) bool{"beta": func(p caseParams) bool { return p.HasBeta }},
		outputs:  []string{"out", "mean", "rstd"},
		check: func(s roleShapes, p caseParams) error {
			x := s["x"]
			d, rows := kernels.Shape{x.Last()}, kernels.Shape{x.Rows()}
			if p.HasBeta {
				if err := s.want("beta", d); err != nil {
					return err
				}
			}
			return s.want("gamma", d, "out", x, "mean", rows, "rstd", rows)
		},
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error {
			return be.LayerNorm(t["out"], t["mean"], t["rstd"], t["x"], t["gamma"], t["beta"], c.Params.Eps)
		},
	},
	"layernorm_backward": {
		params:  []string{"eps"}, // documents the forward; the statistics carry it
		inputs:  []string{"dy", "x", "gamma", "mean", "rstd"},
		outputs: []string{"dx", "dgamma", "dbeta"},
		check: func(s roleShapes, _ caseParams) error {
			x := s["x"]
			d, rows := kernels.Shape{x.Last()}, kernels.Shape{x.Rows()}
			return s.want("dy", x, "gamma", d, "mean", rows, "rstd", rows, "dx", x, "dgamma", d, "dbeta", d)
		},
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, _ *caseData) error {
			return be.LayerNormBackward(t["dx"], t["dgamma"], t["dbeta"], t["dy"], t["x"], t["gamma"], t["mean"], t["rstd"])
		},
	},
	"rmsnorm": {
		params: []string{"eps"}, inputs: []string{"x", "gamma"}, outputs: []string{"out"},
		check: func(s roleShapes, _ caseParams) error {
			return s.want("gamma", kernels.Shape{s["x"].Last()}, "out", s["x"])
		},
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error {
			return be.RMSNorm(t["out"], t["x"], t["gamma"], c.Params.Eps)
		},
	},
	"softmax": {
		params:   []string{"scale", "causal", "keylens"},
		inputs:   []string{"x"},
		optional: map[string]func(caseParams) bool{"keylens": hasKeyLens},
		outputs:  []string{"out"},
		check: func(s roleShapes, p caseParams) error {
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
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error {
			return be.Softmax(t["out"], t["x"], goldenAttnParams(t, c.Params))
		},
	},
	"softmax_backward": {
		inputs: []string{"dy", "y"}, outputs: []string{"dx"},
		check: func(s roleShapes, _ caseParams) error { return s.want("dy", s["y"], "dx", s["y"]) },
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, _ *caseData) error {
			return be.SoftmaxBackward(t["dx"], t["dy"], t["y"])
		},
	},
	"attention": {
		params:   []string{"scale", "causal", "keylens"},
		inputs:   []string{"q", "k", "v"},
		optional: map[string]func(caseParams) bool{"keylens": hasKeyLens},
		outputs:  []string{"out"},
		check: func(s roleShapes, p caseParams) error {
			if err := checkAttentionShapes(s, p); err != nil {
				return err
			}
			return s.want("out", s["q"])
		},
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error {
			return be.Attention(t["out"], t["q"], t["k"], t["v"], goldenAttnParams(t, c.Params))
		},
	},
	"attention_backward": {
		params:   []string{"scale", "causal", "keylens"},
		inputs:   []string{"dy", "q", "k", "v"},
		optional: map[string]func(caseParams) bool{"keylens": hasKeyLens},
		outputs:  []string{"dq", "dk", "dv"},
		check: func(s roleShapes, p caseParams) error {
			if err := checkAttentionShapes(s, p); err != nil {
				return err
			}
			return s.want("dy", s["q"], "dq", s["q"], "dk", s["k"], "dv", s["v"])
		},
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error {
			return be.AttentionBackward(t["dq"], t["dk"], t["dv"], t["dy"], t["q"], t["k"], t["v"], goldenAttnParams(t, c.Params))
		},
	},
	"embedding": {
		inputs: []string{"table", "ids"}, outputs: []string{"out"},
		check: func(s roleShapes, _ caseParams) error {
			if len(s["table"]) != 2 {
				return fmt.Errorf("table has shape %v, want [V, D]", s["table"])
			}
			return s.want("out", append(slices.Clone(s["ids"]), s["table"][1]))
		},
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, _ *caseData) error {
			return be.Embedding(t["out"], t["table"], t["ids"])
		},
	},
	"embedding_backward": {
		inputs: []string{"dy", "ids"}, outputs: []string{"dtable"},
		check: func(s roleShapes, _ caseParams) error {
			if len(s["dtable"]) != 2 {
				return fmt.Errorf("dtable has shape %v, want [V, D]", s["dtable"])
			}
			return s.want("dy", append(slices.Clone(s["ids"]), s["dtable"][1]))
		},
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, _ *caseData) error {
			return be.EmbeddingBackward(t["dtable"], t["dy"], t["ids"])
		},
	},
	"cross_entropy": {
		inputs: []string{"logits", "targets"}, outputs: []string{"loss"},
		check: checkCrossEntropyShapes("loss"),
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, _ *caseData) error {
			return be.CrossEntropy(t["loss"], t["logits"], t["targets"])
		},
	},
	"cross_entropy_backward": {
		params: []string{"scale"}, inputs: []string{"logits", "targets"}, outputs: []string{"dlogits"},
		check: checkCrossEntropyShapes("dlogits"),
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error {
			return be.CrossEntropyBackward(t["dlogits"], t["logits"], t["targets"], c.Params.Scale)
		},
	},
	"swap_axes": {
		dtypes: []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.I32},
		inputs: []string{"x"}, outputs: []string{"out"}, exact: true,
		check: func(s roleShapes, _ caseParams) error {
			x := s["x"]
			if len(x) != 4 {
				return fmt.Errorf("x has shape %v, want [A, B, C, D]", x)
			}
			return s.want("out", kernels.Shape{x[0], x[2], x[1], x[3]})
		},
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, _ *caseData) error {
			return be.SwapAxes(t["out"], t["x"])
		},
	},
	"adamw": {
		params:  []string{"lr", "beta1", "beta2", "eps", "weight_decay", "step"},
		dtypes:  []kernels.DType{kernels.F32},
		inputs:  []string{"param", "grad", "m", "v"},
		outputs: []string{"param_out", "m_out", "v_out"},
		initial: map[string]string{"param_out": "param", "m_out": "m", "v_out": "v"},
		check: func(s roleShapes, _ caseParams) error {
			p := s["param"]
			return s.want("grad", p, "m", p, "v", p, "param_out", p, "m_out", p, "v_out", p)
		},
		run: func(be kernels.Backend, t map[string]*kernels.Tensor, c *caseData) error {
			p := c.Params
			return be.AdamW(t["param_out"], t["grad"], t["m_out"], t["v_out"], kernels.AdamWParams{
				LR: p.LR, Beta1: p.Beta1, Beta2: p.Beta2, Eps: p.Eps, WeightDecay: p.WeightDecay, Step: p.Step,
			})
		},
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

func checkMatMulShapes(s roleShapes, p caseParams) error {
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

func checkAttentionShapes(s roleShapes, p caseParams) error {
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

func checkCrossEntropyShapes(out string) func(roleShapes, caseParams) error {
	return func(s roleShapes, _ caseParams) error {
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

// openGolden opens a golden file and returns it with its case names,
// sorted. Every tensor must belong to a case with parameters and every
// metadata key other than the globals must name a case with tensors.
func openGolden(path string) (*safetensors.File, []string, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("golden: %w", err)
	}
	meta := f.Metadata()
	for _, k := range golden.Globals {
		if _, ok := meta[k]; !ok {
			return nil, nil, fmt.Errorf("golden %s: metadata has no %q: not written by testdata/reference/kernels.py?", path, k)
		}
	}
	withTensors := map[string]bool{}
	for _, n := range f.Tensors() {
		c, _, ok := strings.Cut(n, "/")
		if !ok {
			return nil, nil, fmt.Errorf("golden %s: tensor %q is not named <case>/<role>", path, n)
		}
		withTensors[c] = true
	}
	var cases []string
	for c := range withTensors {
		if _, ok := meta[c]; !ok {
			return nil, nil, fmt.Errorf("golden %s: case %q has tensors but no parameters in the metadata", path, c)
		}
		cases = append(cases, c)
	}
	for k := range meta {
		if !withTensors[k] && !slices.Contains(golden.Globals, k) {
			return nil, nil, fmt.Errorf("golden %s: metadata key %q names no case with tensors", path, k)
		}
	}
	sort.Strings(cases)
	return f, cases, nil
}

// loadCase reads and checks the case name of a golden file: its parameters,
// that it holds exactly the roles its op calls for, with the dtypes and
// roleShapes that the op's documentation implies.
func loadCase(f *safetensors.File, name string) (*caseData, error) {
	fail := func(format string, args ...any) (*caseData, error) {
		return nil, fmt.Errorf("golden case %q: %w", name, fmt.Errorf(format, args...))
	}
	c := &caseData{Name: name, Inputs: map[string]roleData{}, Outputs: map[string]roleData{}}
	raw, keys, err := readParams(f, name, &c.Params)
	if err != nil {
		return fail("%w", err)
	}
	p := c.Params
	spec, ok := goldenOps[p.Op]
	if !ok {
		return fail("unknown op %q: add it to the goldenOps table of bench_test/golden_test.go", p.Op)
	}
	if err := checkParamKeys(raw, p.Op, keys, spec.params); err != nil {
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
		if c.Act, ok = goldenActs[p.Act]; !ok {
			return fail("unknown activation %q", p.Act)
		}
	}

	inputs := slices.Clone(spec.inputs)
	for role, present := range spec.optional {
		if present(p) {
			inputs = append(inputs, role)
		}
	}
	if err := checkRoles(f, name, p.Op+" with these parameters", append(slices.Clone(inputs), spec.outputs...)); err != nil {
		return fail("%w", err)
	}
	s := roleShapes{}
	read := func(role string, want kernels.DType, into map[string]roleData) error {
		d, err := readRole(f, name, role, want)
		if err != nil {
			return err
		}
		into[role], s[role] = d, d.Shape
		return nil
	}
	for _, role := range inputs {
		want := c.DType
		switch {
		case intRoles[role]:
			want = kernels.I32
		case f32Roles[role]:
			want = kernels.F32
		}
		if err := read(role, want, c.Inputs); err != nil {
			return fail("%w", err)
		}
	}
	for _, role := range spec.outputs {
		if err := read(role, kernels.F32, c.Outputs); err != nil {
			return fail("%w", err)
		}
	}
	if err := spec.check(s, p); err != nil {
		return fail("%w", err)
	}
	return c, nil
}

// outputDType is the device dtype of an output role.
func (c *caseData) outputDType(role string) kernels.DType {
	if f32Roles[role] {
		return kernels.F32
	}
	return c.DType
}

// runCase uploads the case's inputs to be, runs its op and returns every
// output downloaded as float32. All tensors are freed.
func runCase(be kernels.Backend, c *caseData) (got map[string][]float32, err error) {
	spec := goldenOps[c.Params.Op]
	t := map[string]*kernels.Tensor{}
	defer func() {
		for _, x := range t {
			if ferr := be.Free(x); ferr != nil && err == nil {
				err = fmt.Errorf("free: %w", ferr)
			}
		}
	}()
	initial := map[string]bool{} // inputs that are only the initial values of outputs
	for _, in := range spec.initial {
		initial[in] = true
	}
	for role, d := range c.Inputs {
		if initial[role] {
			continue
		}
		var x *kernels.Tensor
		if d.DType == kernels.I32 {
			x, err = kernels.FromInt32(be, d.I32, d.Shape...)
		} else {
			x, err = kernels.FromFloat32(be, d.DType, d.F32, d.Shape...)
		}
		if err != nil {
			return nil, fmt.Errorf("upload %s: %w", role, err)
		}
		t[role] = x
	}
	for _, role := range spec.outputs {
		shape := c.Outputs[role].Shape
		var x *kernels.Tensor
		if init, ok := c.Inputs[spec.initial[role]]; ok {
			x, err = kernels.FromFloat32(be, c.outputDType(role), init.F32, shape...)
		} else {
			x, err = be.Alloc(c.outputDType(role), shape...)
		}
		if err != nil {
			return nil, fmt.Errorf("allocate %s: %w", role, err)
		}
		t[role] = x
	}
	if err := spec.run(be, t, c); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Params.Op, err)
	}
	if err := be.Sync(); err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	got = map[string][]float32{}
	for _, role := range spec.outputs {
		if got[role], err = kernels.ToFloat32(t[role]); err != nil {
			return nil, fmt.Errorf("download %s: %w", role, err)
		}
	}
	return got, nil
}

// TestGoldenKernels runs every case of the golden file on every available
// backend and compares each output with the PyTorch reference.
func TestGoldenKernels(t *testing.T) {
	f, cases, err := openGolden(goldenPath)
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	t.Logf("%d golden cases from %s", len(cases), f.Metadata()["reference"])
	require.NotEmpty(t, devices)

	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := loadCase(f, name)
			require.NoError(t, err)
			tol := kernels.Tolerance(c.DType)
			if goldenOps[c.Params.Op].exact {
				tol = 0
			}
			for _, be := range devices {
				t.Run("dev="+be.Name(), func(t *testing.T) {
					got, err := runCase(be, c)
					if errors.Is(err, kernels.ErrUnsupported) {
						t.Fatalf("case %s on %s: op %s is not implemented: %v", name, be.Name(), c.Params.Op, err)
					}
					require.NoError(t, err, "case %s on %s", name, be.Name())
					for _, role := range goldenOps[c.Params.Op].outputs {
						want := c.Outputs[role].F32
						require.Len(t, got[role], len(want), "case %s on %s: output %s", name, be.Name(), role)
						rel, maxAbs := kernels.RelErr(widen(got[role]), widen(want))
						if !(rel <= tol) { // NaN fails too
							t.Errorf("case %s on %s: output %s (%v%v): rel-err %.3g > tolerance %.3g for %v, max-abs %.3g",
								name, be.Name(), role, c.outputDType(role), c.Outputs[role].Shape, rel, tol, c.DType, maxAbs)
						}
					}
				})
			}
		})
	}
}

// TestGoldenFile checks that the golden file has the reference
// implementation's canonical layout (the Python writer agrees with
// safetensors.Write byte for byte) and records its provenance.
func TestGoldenFile(t *testing.T) {
	f, cases := requireCanonicalGolden(t, goldenPath)
	seen := map[string]bool{}
	for _, name := range cases {
		c, err := loadCase(f, name)
		require.NoError(t, err)
		seen[c.Params.Op] = true
		requireFinite(t, name, c.Outputs)
	}
	for op := range goldenOps {
		assert.True(t, seen[op], "no golden case for op %s", op)
	}
}

// requireCanonicalGolden opens a golden file of kernels.py, checks its
// provenance, its size and that it is its canonical serialization, and
// returns it with its case names.
func requireCanonicalGolden(t *testing.T, path string) (*safetensors.File, []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	f, cases, err := openGolden(path)
	require.NoError(t, err)
	meta := f.Metadata()
	assert.True(t, strings.HasPrefix(meta["reference"], "torch "), "reference = %q", meta["reference"])
	assert.Equal(t, "testdata/reference/kernels.py", meta["script"])
	assert.Less(t, len(b), 2<<20, "golden file should stay small")

	var tensors []safetensors.Tensor
	for _, n := range f.Tensors() {
		tt, err := f.Tensor(n)
		require.NoError(t, err)
		tensors = append(tensors, tt)
	}
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, tensors, meta))
	assert.True(t, bytes.Equal(b, buf.Bytes()), "%s differs from its canonical serialization", path)
	return f, cases
}

// readParams decodes the JSON parameters of case name, in the file's
// metadata, into params, refusing unknown fields; it returns the JSON and
// its keys.
func readParams(f *safetensors.File, name string, params any) (string, map[string]json.RawMessage, error) {
	raw, ok := f.Metadata()[name]
	if !ok {
		return "", nil, errors.New("no parameters in the metadata")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &keys); err != nil {
		return "", nil, fmt.Errorf("parameters %s: %w", raw, err)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(params); err != nil {
		return "", nil, fmt.Errorf("parameters %s: %w", raw, err)
	}
	return raw, keys, nil
}

// checkParamKeys checks that a case's parameters raw (with keys) hold
// exactly op, dtype and the parameters op takes.
func checkParamKeys(raw, op string, keys map[string]json.RawMessage, params []string) error {
	wantKeys := append([]string{"op", "dtype"}, params...)
	for _, k := range wantKeys {
		if _, ok := keys[k]; !ok {
			return fmt.Errorf("parameters %s: no %q (op %s takes %v)", raw, k, op, wantKeys)
		}
	}
	for k := range keys {
		if !slices.Contains(wantKeys, k) {
			return fmt.Errorf("parameters %s: unexpected %q (op %s takes %v)", raw, k, op, wantKeys)
		}
	}
	return nil
}

// checkRoles checks that every tensor of case name is one of roles (of
// the op described by what).
func checkRoles(f *safetensors.File, name, what string, roles []string) error {
	for _, n := range f.Tensors() {
		if role, ok := strings.CutPrefix(n, name+"/"); ok && !slices.Contains(roles, role) {
			return fmt.Errorf("unexpected tensor %q: op %s has roles %v", n, what, roles)
		}
	}
	return nil
}

// readRole reads the tensor "<name>/<role>" of a golden file, which must
// be of dtype want and have a valid shape.
func readRole(f *safetensors.File, name, role string, want kernels.DType) (roleData, error) {
	t, err := f.Tensor(name + "/" + role)
	if err != nil {
		return roleData{}, fmt.Errorf("role %q: %w", role, err)
	}
	got, err := t.KernelDType()
	if err != nil || got != want {
		return roleData{}, fmt.Errorf("role %q is %s, want %v", role, t.DType, want)
	}
	d := roleData{Shape: kernels.Shape(t.Shape), DType: got}
	if got == kernels.I32 {
		d.I32, err = t.Int32()
	} else {
		d.F32, err = t.Float32()
	}
	if err != nil {
		return roleData{}, fmt.Errorf("role %q: %w", role, err)
	}
	if err := d.Shape.Validate(); err != nil {
		return roleData{}, fmt.Errorf("role %q: %w", role, err)
	}
	return d, nil
}

// requireFinite fails the test when an expected output of the case holds
// NaN or Inf.
func requireFinite(t *testing.T, name string, outputs map[string]roleData) {
	t.Helper()
	for role, d := range outputs {
		for i, v := range d.F32 {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("case %s: expected %s[%d] = %v", name, role, i, v)
			}
		}
	}
}

// goldenFile builds an in-memory golden file from tensors and params.
func goldenFile(t *testing.T, tensors []safetensors.Tensor, params map[string]string) *safetensors.File {
	t.Helper()
	meta := map[string]string{"format": "test", "reference": "torch test", "script": "test", "seed": "0"}
	for k, v := range params {
		meta[k] = v
	}
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, tensors, meta))
	f, err := safetensors.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	return f
}

func zerosF32(name string, shape ...int) safetensors.Tensor {
	n := kernels.Shape(shape).Len()
	return safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: make([]byte, 4*n)}
}

// TestGoldenErrors checks that a corrupt, truncated or mismatched golden
// file is reported clearly rather than skipped or misread.
func TestGoldenErrors(t *testing.T) {
	t.Run("corrupt", func(t *testing.T) {
		path := t.TempDir() + "/corrupt.safetensors"
		require.NoError(t, os.WriteFile(path, []byte("\x0f\x00\x00\x00\x00\x00\x00\x00{\"a\": not json}"), 0o644))
		_, _, err := openGolden(path)
		require.ErrorIs(t, err, safetensors.ErrInvalid)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "invalid JSON header")
	})
	t.Run("truncated", func(t *testing.T) {
		b, err := os.ReadFile(goldenPath)
		require.NoError(t, err)
		path := t.TempDir() + "/truncated.safetensors"
		require.NoError(t, os.WriteFile(path, b[:len(b)-100], 0o644))
		_, _, err = openGolden(path)
		require.ErrorIs(t, err, safetensors.ErrInvalid)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "out of range")
	})
	t.Run("not a golden file", func(t *testing.T) {
		path := t.TempDir() + "/plain.safetensors"
		var buf bytes.Buffer
		require.NoError(t, safetensors.Write(&buf, []safetensors.Tensor{zerosF32("w", 2)}, nil))
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		_, _, err := openGolden(path)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `metadata has no "format"`)
	})

	const mm = `{"act":"none","alpha":1.0,"beta":0.0,"bias":false,"dtype":"f32","op":"matmul","trans_a":false,"trans_b":false}`
	good := []safetensors.Tensor{zerosF32("mm/a", 3, 4), zerosF32("mm/b", 4, 5), zerosF32("mm/out", 3, 5)}
	tests := []struct {
		name    string
		tensors []safetensors.Tensor
		params  string
		want    string
	}{
		{"valid", good, mm, ""},
		{"missing role", good[1:], mm, `golden case "mm": role "a": safetensors: tensor "mm/a" not in the safetensors data`},
		{"wrong shape", []safetensors.Tensor{good[0], zerosF32("mm/b", 5, 4), good[2]}, mm, "disagree on K: 4 vs 5"},
		{"wrong output shape", []safetensors.Tensor{good[0], good[1], zerosF32("mm/out", 5, 3)}, mm, "out has shape [5 3], want [3 5]"},
		{"unexpected role", append(slices.Clone(good), zerosF32("mm/bias", 5)), mm, `unexpected tensor "mm/bias"`},
		{"flag without role", good, strings.Replace(mm, `"bias":false`, `"bias":true`, 1), `role "bias": safetensors: tensor "mm/bias" not in`},
		{
			"wrong dtype",
			[]safetensors.Tensor{{Name: "mm/a", DType: "F16", Shape: []int{3, 4}, Data: make([]byte, 24)}, good[1], good[2]},
			mm, `role "a" is F16, want f32`,
		},
		{"unknown op", good, strings.Replace(mm, `"matmul"`, `"conv2d"`, 1), `unknown op "conv2d"`},
		{"unknown param", good, strings.Replace(mm, `"act"`, `"acts"`, 1), `unknown field "acts"`},
		{"missing param", good, strings.Replace(mm, `"alpha":1.0,`, ``, 1), `no "alpha"`},
		{"bad activation", good, strings.Replace(mm, `"none"`, `"swish"`, 1), `unknown activation "swish"`},
		{"bad dtype", good, strings.Replace(mm, `"f32"`, `"f64"`, 1), `dtype "f64", want one of [f32 f16 bf16] for op matmul`},
		{"dtype of another op", good, strings.Replace(mm, `"f32"`, `"i32"`, 1), `dtype "i32", want one of [f32 f16 bf16] for op matmul`},
		{"invalid params", good, `{"op":`, "parameters {\"op\":"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := goldenFile(t, tc.tensors, map[string]string{"mm": tc.params})
			c, err := loadCase(f, "mm")
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, "matmul", c.Params.Op)
				return
			}
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	t.Run("no params", func(t *testing.T) {
		f := goldenFile(t, good, nil)
		_, err := loadCase(f, "mm")
		require.Error(t, err)
		assert.Contains(t, err.Error(), `golden case "mm": no parameters in the metadata`)
	})
	t.Run("case without params", func(t *testing.T) {
		path := t.TempDir() + "/orphan.safetensors"
		var buf bytes.Buffer
		meta := map[string]string{"format": "test", "reference": "torch test", "script": "test", "seed": "0"}
		require.NoError(t, safetensors.Write(&buf, good, meta))
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		_, _, err := openGolden(path)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `case "mm" has tensors but no parameters`)
	})
	t.Run("params without case", func(t *testing.T) {
		path := t.TempDir() + "/stray.safetensors"
		var buf bytes.Buffer
		meta := map[string]string{"format": "test", "reference": "torch test", "script": "test", "seed": "0", "mm": mm, "gone": mm}
		require.NoError(t, safetensors.Write(&buf, good, meta))
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		_, _, err := openGolden(path)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `metadata key "gone" names no case with tensors`)
	})
}
