package bench_test

import (
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

// visionGoldenPath holds the kernels.Vision cases written by
// testdata/reference/kernels.py in torch's layout (NCHW images,
// [Co, Ci/G, Kh, Kw] filters); the test moves them to the ops' NHWC.
const visionGoldenPath = "../testdata/golden/vision.safetensors"

// visionParams are the parameters of a vision golden case.
type visionParams struct {
	Op       string `json:"op"`
	DType    string `json:"dtype"`
	Stride   [2]int `json:"stride"`
	Padding  [2]int `json:"padding"`
	Dilation [2]int `json:"dilation"`
	Groups   int    `json:"groups"`
	Act      string `json:"act"`
	Kernel   [2]int `json:"kernel"`
	NaN      string `json:"nan"` // how the reference treats NaN, for the record
}

// visionOps lists, per op, its parameters (besides op and dtype), its
// required and optional input roles.
var visionOps = map[string]struct {
	params, inputs, optional []string
}{
	"conv2d":          {[]string{"stride", "padding", "dilation", "groups", "act"}, []string{"x", "w"}, []string{"bias", "residual"}},
	"max_pool2d":      {[]string{"kernel", "stride", "padding", "dilation"}, []string{"x"}, []string{"nan"}},
	"global_avg_pool": {nil, []string{"x"}, nil},
}

// visionCase is a loaded vision golden case, NHWC.
type visionCase struct {
	Name   string
	Params visionParams
	DType  kernels.DType
	Act    kernels.Activation
	In     map[string]roleData // NHWC, filters [Co, Kh, Kw, Ci/G]
	Out    roleData            // NHWC ([N, C] for global_avg_pool)
}

// activationByName maps the reference's activation names to the ops'.
func activationByName(s string) (kernels.Activation, error) {
	for a := kernels.ActNone; a <= kernels.ActTanh; a++ {
		if a.String() == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("unknown activation %q", s)
}

// nchwToNHWC moves the channels of d [N, C, H, W] innermost.
func nchwToNHWC(d roleData) roleData {
	s := d.Shape
	n, c, h, w := s[0], s[1], s[2], s[3]
	out := make([]float32, len(d.F32))
	for i := range n {
		for ch := range c {
			for p := range h * w {
				out[(i*h*w+p)*c+ch] = d.F32[(i*c+ch)*h*w+p]
			}
		}
	}
	return roleData{Shape: kernels.Shape{n, h, w, c}, DType: d.DType, F32: out}
}

// loadVisionCase reads and checks case name and converts it to NHWC.
func loadVisionCase(f *safetensors.File, name string) (*visionCase, error) {
	fail := func(format string, args ...any) (*visionCase, error) {
		return nil, fmt.Errorf("vision golden case %q: %w", name, fmt.Errorf(format, args...))
	}
	c := &visionCase{Name: name, In: map[string]roleData{}}
	raw, keys, err := readParams(f, name, &c.Params)
	if err != nil {
		return fail("%w", err)
	}
	spec, ok := visionOps[c.Params.Op]
	if !ok {
		return fail("unknown op %q: add it to the visionOps table of bench_test/vision_golden_test.go", c.Params.Op)
	}
	params := spec.params
	if _, ok := keys["nan"]; ok && slices.Contains(spec.optional, "nan") {
		params = append(slices.Clone(params), "nan")
	}
	if err := checkParamKeys(raw, c.Params.Op, keys, params); err != nil {
		return fail("%w", err)
	}
	if c.DType, err = kernels.ParseDType(c.Params.DType); err != nil || !slices.Contains(goldenFloatTypes, c.DType) {
		return fail("dtype %q, want one of %v", c.Params.DType, goldenFloatTypes)
	}
	if c.Params.Op == "conv2d" {
		if c.Act, err = activationByName(c.Params.Act); err != nil {
			return fail("%w", err)
		}
	}
	roles := append(append(slices.Clone(spec.inputs), spec.optional...), "out")
	if err := checkRoles(f, name, c.Params.Op, roles); err != nil {
		return fail("%w", err)
	}
	for _, role := range append(slices.Clone(spec.inputs), spec.optional...) {
		if !slices.Contains(f.Tensors(), name+"/"+role) {
			if slices.Contains(spec.inputs, role) {
				return fail("no role %q", role)
			}
			continue
		}
		d, err := readRole(f, name, role, c.DType)
		if err != nil {
			return fail("%w", err)
		}
		switch {
		case role == "bias":
			c.In[role] = d
		case len(d.Shape) != 4:
			return fail("%s has shape %v, want 4 dimensions (NCHW)", role, d.Shape)
		default:
			c.In[role] = nchwToNHWC(d)
		}
	}
	if c.Out, err = readRole(f, name, "out", kernels.F32); err != nil {
		return fail("%w", err)
	}
	if len(c.Out.Shape) == 4 {
		c.Out = nchwToNHWC(c.Out)
	}
	return c, nil
}

// runVisionCase runs the case on be and returns its output, NHWC.
func runVisionCase(be kernels.Backend, c *visionCase) (got []float32, err error) {
	v, ok := be.(kernels.Vision)
	if !ok {
		return nil, fmt.Errorf("%s does not implement kernels.Vision: %w", be.Name(), kernels.ErrUnsupported)
	}
	t := map[string]*kernels.Tensor{}
	defer func() {
		for _, x := range t {
			if ferr := be.Free(x); ferr != nil && err == nil {
				err = fmt.Errorf("free: %w", ferr)
			}
		}
	}()
	for role, d := range c.In {
		if t[role], err = kernels.FromFloat32(be, c.DType, d.F32, d.Shape...); err != nil {
			return nil, fmt.Errorf("upload %s: %w", role, err)
		}
	}
	if t["out"], err = be.Alloc(c.DType, c.Out.Shape...); err != nil {
		return nil, fmt.Errorf("allocate out: %w", err)
	}
	p := c.Params
	switch p.Op {
	case "conv2d":
		err = v.Conv2D(t["out"], t["x"], t["w"], kernels.ConvParams{Stride: p.Stride, Pad: p.Padding, Dilation: p.Dilation,
			Groups: p.Groups, Bias: t["bias"], Residual: t["residual"], Act: c.Act})
	case "max_pool2d":
		err = v.MaxPool2D(t["out"], t["x"], kernels.PoolParams{Kernel: p.Kernel, Stride: p.Stride, Pad: p.Padding, Dilation: p.Dilation})
	case "global_avg_pool":
		err = v.GlobalAvgPool(t["out"], t["x"])
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Op, err)
	}
	return kernels.ToFloat32(t["out"])
}

// visionDevices are the devices that implement kernels.Vision.
func visionDevices() []kernels.Backend { return devicesWith[kernels.Vision]() }

// TestVisionGolden runs every case of the vision golden file on every
// device that implements kernels.Vision: within the dtype's tolerance,
// NaN and infinities of max pooling in the same places.
func TestVisionGolden(t *testing.T) {
	f, cases, err := openGolden(visionGoldenPath)
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	devs := visionDevices()
	require.NotEmpty(t, devs, "no device implements kernels.Vision")
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := loadVisionCase(f, name)
			require.NoError(t, err)
			for _, be := range devs {
				t.Run("dev="+be.Name(), func(t *testing.T) {
					got, err := runVisionCase(be, c)
					require.NoError(t, err)
					want := widen(c.Out.F32)
					require.Len(t, got, len(want))
					g := widen(got)
					var gf, wf []float64 // the finite values, once non-finite ones agree
					for i, w := range want {
						if math.IsNaN(w) || math.IsInf(w, 0) {
							require.Truef(t, math.IsNaN(w) && math.IsNaN(g[i]) || w == g[i], "out[%d] = %v, want %v", i, g[i], w)
							continue
						}
						gf, wf = append(gf, g[i]), append(wf, w)
					}
					tol := kernels.Tolerance(c.DType)
					rel, maxAbs := kernels.RelErr(gf, wf)
					assert.Truef(t, rel <= tol, "%s on %s: rel-err %.3g > %.3g (max-abs %.3g)", name, be.Name(), rel, tol, maxAbs)
				})
			}
		})
	}
}

// TestVisionGoldenFile checks the file's canonical layout and that it
// covers every op, every dtype, grouped and strided convolutions, the
// epilogue's roles and NaN in max pooling.
func TestVisionGoldenFile(t *testing.T) {
	f, cases := requireCanonicalGolden(t, visionGoldenPath)
	seen := map[string]bool{}
	for _, name := range cases {
		c, err := loadVisionCase(f, name)
		require.NoError(t, err)
		seen[c.Params.Op+"/"+c.Params.DType] = true
		for role := range c.In {
			seen[c.Params.Op+"/"+role] = true
		}
		if c.Params.Groups > 1 {
			seen["groups"] = true
		}
		if c.Params.NaN != "" {
			seen["nan"] = true
		}
	}
	for op := range visionOps {
		for _, dt := range goldenFloatTypes {
			assert.True(t, seen[op+"/"+dt.String()], "no %s case in %v", op, dt)
		}
	}
	for _, k := range []string{"conv2d/bias", "conv2d/residual", "groups", "nan"} {
		assert.True(t, seen[k], "no golden case covers %s", k)
	}
}

// TestVisionGoldenErrors checks that a mismatched case is reported
// clearly.
func TestVisionGoldenErrors(t *testing.T) {
	const conv = `{"act":"relu","dilation":[1,1],"dtype":"f32","groups":1,"op":"conv2d","padding":[0,0],"stride":[1,1]}`
	x, w, out := zerosF32("c/x", 1, 2, 3, 3), zerosF32("c/w", 4, 2, 1, 1), zerosF32("c/out", 1, 4, 3, 3)
	for _, tc := range []struct {
		name    string
		tensors []safetensors.Tensor
		params  string
		want    string
	}{
		{"valid", []safetensors.Tensor{x, w, out}, conv, ""},
		{"no filter", []safetensors.Tensor{x, out}, conv, `no role "w"`},
		{"unexpected role", []safetensors.Tensor{x, w, out, zerosF32("c/scale", 4)}, conv, `unexpected tensor "c/scale"`},
		{"unknown act", []safetensors.Tensor{x, w, out}, strings.Replace(conv, "relu", "swish", 1), `unknown activation "swish"`},
		{"missing param", []safetensors.Tensor{x, w, out}, strings.Replace(conv, `"groups":1,`, "", 1), `no "groups"`},
		{"unknown op", []safetensors.Tensor{x, w, out}, strings.Replace(conv, "conv2d", "conv3d", 1), `unknown op "conv3d"`},
		{"3-D image", []safetensors.Tensor{zerosF32("c/x", 2, 3, 3), w, out}, conv, "want 4 dimensions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := goldenFile(t, tc.tensors, map[string]string{"c": tc.params})
			_, err := loadVisionCase(f, "c")
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}
