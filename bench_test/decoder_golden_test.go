package bench_test

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
)

// decoderGoldenPath holds the kernels.Decoder cases written by
// testdata/reference/kernels.py (regenerate with: /usr/bin/python3
// testdata/reference/kernels.py), in the layout of kernels.safetensors.
const decoderGoldenPath = "../testdata/golden/decoder.safetensors"

// decoderParams are the parameters of a decoder golden case. rope_theta
// and rope_scaling record how the case's inv_freq was made (the op reads
// only the tensor).
type decoderParams struct {
	Op          string          `json:"op"`
	DType       string          `json:"dtype"`
	Scale       float32         `json:"scale"`
	RopeTheta   float64         `json:"rope_theta"`
	RopeScaling json.RawMessage `json:"rope_scaling"`
}

// decoderCase is a decoder golden case: its parameters, inputs (in the
// case's dtype, or I32, or F32 for inv_freq) and expected outputs (F32
// computed in float64, or I32 indices).
type decoderCase struct {
	Name    string
	Params  decoderParams
	DType   kernels.DType
	Inputs  map[string]roleData
	Outputs map[string]roleData
}

// decoderOp describes how a decoder golden case of one op is laid out and
// run.
type decoderOp struct {
	params  []string // keys besides op and dtype
	inputs  []string
	outputs []string
	// initial maps an output to the input holding its value before the op
	// (RoPE works in place, CacheWrite keeps the rest of the cache).
	initial map[string]string
	exact   bool // data movement and indices: outputs equal the reference exactly
	check   func(s roleShapes) error
	run     func(d kernels.Decoder, t map[string]*kernels.Tensor, p decoderParams) error
}

var (
	// decoderIntRoles are I32 in the file and on the device; decoderF32Roles
	// are F32 whatever the case's dtype.
	decoderIntRoles = map[string]bool{"pos": true, "start": true, "lens": true}
	decoderF32Roles = map[string]bool{"inv_freq": true}
)

// decoderOps lists every op the decoder golden file may hold.
var decoderOps = map[string]decoderOp{
	"rope": {
		params: []string{"rope_theta", "rope_scaling"},
		inputs: []string{"x", "pos", "inv_freq"}, outputs: []string{"out"},
		initial: map[string]string{"out": "x"},
		check: func(s roleShapes) error {
			x := s["x"]
			if len(x) != 4 || x[3]%2 != 0 {
				return fmt.Errorf("x has shape %v, want [B, S, H, D] with D even", x)
			}
			return s.want("pos", kernels.Shape{x[0], x[1]}, "inv_freq", kernels.Shape{x[3] / 2}, "out", x)
		},
		run: func(d kernels.Decoder, t map[string]*kernels.Tensor, _ decoderParams) error {
			return d.RoPE(t["out"], t["pos"], t["inv_freq"])
		},
	},
	"swiglu": {
		inputs: []string{"gate", "up"}, outputs: []string{"out"},
		check: func(s roleShapes) error { return s.want("up", s["gate"], "out", s["gate"]) },
		run: func(d kernels.Decoder, t map[string]*kernels.Tensor, _ decoderParams) error {
			return d.SwiGLU(t["out"], t["gate"], t["up"])
		},
	},
	"cache_write": {
		inputs: []string{"cache", "x", "start"}, outputs: []string{"out"},
		initial: map[string]string{"out": "cache"}, exact: true,
		check: func(s roleShapes) error {
			c, x := s["cache"], s["x"]
			if len(c) != 4 || len(x) != 4 {
				return fmt.Errorf("cache %v and x %v, want [B, H, T, D] and [B, S, H, D]", c, x)
			}
			return s.want("x", kernels.Shape{c[0], x[1], c[1], c[3]}, "start", kernels.Shape{c[0]}, "out", c)
		},
		run: func(d kernels.Decoder, t map[string]*kernels.Tensor, _ decoderParams) error {
			return d.CacheWrite(t["out"], t["x"], t["start"])
		},
	},
	"cached_attention": {
		params: []string{"scale"},
		inputs: []string{"q", "k", "v", "lens"}, outputs: []string{"out"},
		check: func(s roleShapes) error {
			q, k := s["q"], s["k"]
			if len(q) != 4 || len(k) != 4 || q[0] != k[0] || q[3] != k[3] || k[1] == 0 || q[1]%k[1] != 0 {
				return fmt.Errorf("q %v and k %v, want [B, Hq, Sq, D] and [B, Hkv, T, D] with Hkv dividing Hq", q, k)
			}
			return s.want("v", k, "lens", kernels.Shape{q[0]}, "out", q)
		},
		run: func(d kernels.Decoder, t map[string]*kernels.Tensor, p decoderParams) error {
			return d.CachedAttention(t["out"], t["q"], t["k"], t["v"], t["lens"], p.Scale)
		},
	},
	"argmax": {
		inputs: []string{"x"}, outputs: []string{"out"}, exact: true,
		check: func(s roleShapes) error {
			x := s["x"]
			if len(x) < 2 {
				return fmt.Errorf("x has shape %v, want [rows…, V]", x)
			}
			return s.want("out", x[:len(x)-1])
		},
		run: func(d kernels.Decoder, t map[string]*kernels.Tensor, _ decoderParams) error {
			return d.Argmax(t["out"], t["x"])
		},
	},
}

// decoderIntOutputs are the I32 outputs, by op.
var decoderIntOutputs = map[string]bool{"argmax/out": true}

// roleDType is the dtype of a role of case c, in the file and on the
// device.
func (c *decoderCase) roleDType(role string) kernels.DType {
	switch {
	case decoderIntRoles[role], decoderIntOutputs[c.Params.Op+"/"+role]:
		return kernels.I32
	case decoderF32Roles[role]:
		return kernels.F32
	}
	return c.DType
}

// loadDecoderCase reads and checks the case name: its parameters (exactly
// the keys its op takes), its roles (exactly the op's), their dtypes and
// shapes.
func loadDecoderCase(f *safetensors.File, name string) (*decoderCase, error) {
	fail := func(format string, args ...any) (*decoderCase, error) {
		return nil, fmt.Errorf("decoder golden case %q: %w", name, fmt.Errorf(format, args...))
	}
	c := &decoderCase{Name: name, Inputs: map[string]roleData{}, Outputs: map[string]roleData{}}
	raw, keys, err := readParams(f, name, &c.Params)
	if err != nil {
		return fail("%w", err)
	}
	spec, ok := decoderOps[c.Params.Op]
	if !ok {
		return fail("unknown op %q: add it to the decoderOps table of bench_test/decoder_golden_test.go", c.Params.Op)
	}
	if err := checkParamKeys(raw, c.Params.Op, keys, spec.params); err != nil {
		return fail("%w", err)
	}
	dt, err := kernels.ParseDType(c.Params.DType)
	if err != nil || !slices.Contains(goldenFloatTypes, dt) {
		return fail("dtype %q, want one of %v", c.Params.DType, goldenFloatTypes)
	}
	c.DType = dt
	if err := checkRoles(f, name, c.Params.Op, append(slices.Clone(spec.inputs), spec.outputs...)); err != nil {
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
	for _, role := range spec.inputs {
		if err := read(role, c.roleDType(role), c.Inputs); err != nil {
			return fail("%w", err)
		}
	}
	for _, role := range spec.outputs {
		want := kernels.F32 // expected values, computed in float64
		if c.roleDType(role) == kernels.I32 {
			want = kernels.I32
		}
		if err := read(role, want, c.Outputs); err != nil {
			return fail("%w", err)
		}
	}
	if err := spec.check(s); err != nil {
		return fail("%w", err)
	}
	return c, nil
}

// uploadRole copies a role's values to be in dtype dt.
func uploadRole(be kernels.Backend, d roleData, dt kernels.DType) (*kernels.Tensor, error) {
	if dt == kernels.I32 {
		return kernels.FromInt32(be, d.I32, d.Shape...)
	}
	return kernels.FromFloat32(be, dt, d.F32, d.Shape...)
}

// runDecoderCase uploads the case's inputs to be, runs its op and returns
// every output downloaded (float outputs widened from the case's dtype,
// I32 outputs as float64 indices). All tensors are freed.
func runDecoderCase(be kernels.Backend, c *decoderCase) (got map[string][]float64, err error) {
	d, ok := be.(kernels.Decoder)
	if !ok {
		return nil, fmt.Errorf("%s does not implement kernels.Decoder: %w", be.Name(), kernels.ErrUnsupported)
	}
	spec := decoderOps[c.Params.Op]
	t := map[string]*kernels.Tensor{}
	defer func() {
		for _, x := range t {
			if ferr := be.Free(x); ferr != nil && err == nil {
				err = fmt.Errorf("free: %w", ferr)
			}
		}
	}()
	initial := map[string]bool{}
	for _, in := range spec.initial {
		initial[in] = true
	}
	for role, v := range c.Inputs {
		if initial[role] {
			continue
		}
		if t[role], err = uploadRole(be, v, c.roleDType(role)); err != nil {
			return nil, fmt.Errorf("upload %s: %w", role, err)
		}
	}
	for _, role := range spec.outputs {
		dt := c.roleDType(role)
		if in, ok := spec.initial[role]; ok {
			t[role], err = uploadRole(be, c.Inputs[in], dt)
		} else {
			t[role], err = be.Alloc(dt, c.Outputs[role].Shape...)
		}
		if err != nil {
			return nil, fmt.Errorf("allocate %s: %w", role, err)
		}
	}
	if err := spec.run(d, t, c.Params); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Params.Op, err)
	}
	if err := be.Sync(); err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	got = map[string][]float64{}
	for _, role := range spec.outputs {
		if c.roleDType(role) == kernels.I32 {
			v, err := kernels.ToInt32(t[role])
			if err != nil {
				return nil, fmt.Errorf("download %s: %w", role, err)
			}
			got[role] = make([]float64, len(v))
			for i, x := range v {
				got[role][i] = float64(x)
			}
			continue
		}
		v, err := kernels.ToFloat32(t[role])
		if err != nil {
			return nil, fmt.Errorf("download %s: %w", role, err)
		}
		got[role] = widen(v)
	}
	return got, nil
}

// values returns the values of a role as float64.
func (d roleData) values() []float64 {
	if d.DType == kernels.I32 {
		out := make([]float64, len(d.I32))
		for i, x := range d.I32 {
			out[i] = float64(x)
		}
		return out
	}
	return widen(d.F32)
}

// TestDecoderGolden runs every case of the decoder golden file on every
// device that implements kernels.Decoder and compares each output with the
// PyTorch reference: exactly for CacheWrite and Argmax, within the dtype's
// kernels.Tolerance otherwise.
func TestDecoderGolden(t *testing.T) {
	f, cases, err := openGolden(decoderGoldenPath)
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	devs := decoders()
	require.NotEmpty(t, devs, "no device implements kernels.Decoder")
	t.Logf("%d decoder golden cases from %s", len(cases), f.Metadata()["reference"])

	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := loadDecoderCase(f, name)
			require.NoError(t, err)
			spec := decoderOps[c.Params.Op]
			for _, be := range devs {
				t.Run("dev="+be.Name(), func(t *testing.T) {
					got, err := runDecoderCase(be, c)
					require.NoError(t, err, "case %s on %s", name, be.Name())
					for _, role := range spec.outputs {
						want := c.Outputs[role].values()
						require.Len(t, got[role], len(want), "case %s on %s: output %s", name, be.Name(), role)
						if spec.exact {
							if i := firstDiff(got[role], want); i >= 0 {
								t.Errorf("case %s on %s: output %s%v differs at %d: got %v, want %v",
									name, be.Name(), role, c.Outputs[role].Shape, i, got[role][i], want[i])
							}
							continue
						}
						tol := kernels.Tolerance(c.DType)
						rel, maxAbs := kernels.RelErr(got[role], want)
						if !(rel <= tol) { // NaN fails too
							t.Errorf("case %s on %s: output %s (%v%v): rel-err %.3g > tolerance %.3g, max-abs %.3g",
								name, be.Name(), role, c.DType, c.Outputs[role].Shape, rel, tol, maxAbs)
						}
					}
				})
			}
		})
	}
}

// firstDiff returns the first index where got and want differ, or −1.
func firstDiff(got, want []float64) int {
	for i := range want {
		if got[i] != want[i] && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
			return i
		}
	}
	return -1
}

// TestDecoderGoldenFile checks that the decoder golden file has the
// canonical layout, that every case loads, that it covers every op and
// that its expected values are finite.
func TestDecoderGoldenFile(t *testing.T) {
	f, cases := requireCanonicalGolden(t, decoderGoldenPath)
	seen := map[string]bool{}
	for _, name := range cases {
		c, err := loadDecoderCase(f, name)
		require.NoError(t, err)
		seen[c.Params.Op] = true
		requireFinite(t, name, c.Outputs)
	}
	for op := range decoderOps {
		assert.True(t, seen[op], "no decoder golden case for op %s", op)
	}
}

// TestDecoderGoldenErrors checks that a mismatched decoder case is
// reported clearly rather than skipped or misread.
func TestDecoderGoldenErrors(t *testing.T) {
	const am = `{"dtype":"f32","op":"argmax"}`
	x := zerosF32("am/x", 3, 7)
	out := safetensors.Tensor{Name: "am/out", DType: "I32", Shape: []int{3}, Data: make([]byte, 12)}
	tests := []struct {
		name    string
		tensors []safetensors.Tensor
		params  string
		want    string
	}{
		{"valid", []safetensors.Tensor{x, out}, am, ""},
		{"float indices", []safetensors.Tensor{x, zerosF32("am/out", 3)}, am, `role "out" is F32, want i32`},
		{"wrong shape", []safetensors.Tensor{x, {Name: "am/out", DType: "I32", Shape: []int{7}, Data: make([]byte, 28)}}, am,
			"out has shape [7], want [3]"},
		{"unexpected role", []safetensors.Tensor{x, out, zerosF32("am/y", 3)}, am, `unexpected tensor "am/y"`},
		{"unknown op", []safetensors.Tensor{x, out}, strings.Replace(am, "argmax", "topk", 1), `unknown op "topk"`},
		{"param of another op", []safetensors.Tensor{x, out}, strings.Replace(am, `{`, `{"scale":0.5,`, 1), `unexpected "scale"`},
		{"missing param", []safetensors.Tensor{x, out}, strings.Replace(am, "argmax", "cached_attention", 1), `no "scale"`},
		{"bad dtype", []safetensors.Tensor{x, out}, strings.Replace(am, "f32", "i32", 1), `dtype "i32"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := goldenFile(t, tc.tensors, map[string]string{"am": tc.params})
			c, err := loadDecoderCase(f, "am")
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, "argmax", c.Params.Op)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	t.Run("no decoder", func(t *testing.T) {
		_, err := runDecoderCase(notDecoder{}, &decoderCase{Params: decoderParams{Op: "argmax"}})
		require.ErrorIs(t, err, kernels.ErrUnsupported)
		assert.Contains(t, err.Error(), "does not implement kernels.Decoder")
	})
}

// notDecoder is a backend without the Decoder ops (only Name is called).
type notDecoder struct{ kernels.Backend }

func (notDecoder) Name() string { return "plain" }
