// Package golden reads the golden files of testdata/golden, which the
// PyTorch scripts of testdata/reference write: safetensors files whose
// tensors are named <case>/<role> and whose metadata holds, besides the
// file's globals (Globals), each case's parameters as a JSON object under
// the case's name. It also compares outputs with their references, within
// a tolerance on ‖out−ref‖/‖ref‖.
package golden

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/safetensors"
)

// Globals are the metadata keys of a golden file that describe the file
// rather than one of its cases.
var Globals = []string{"format", "reference", "script", "seed"}

// Dir returns the repository's testdata/golden folder, found from the
// working directory (a package's folder when tests run) upwards as the
// first folder holding go.mod.
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("golden: %w", err)
	}
	for d := wd; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "testdata", "golden"), nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("golden: no go.mod in %s or any folder above it", wd)
		}
		d = up
	}
}

// Path returns the path of name (a file or folder) in testdata/golden.
func Path(name string) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.FromSlash(name)), nil
}

// File is an opened golden file and the names of its cases.
type File struct {
	*safetensors.File
	path  string
	names []string
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Names returns the names of the file's cases, sorted.
func (f *File) Names() []string { return slices.Clone(f.names) }

// Open opens testdata/golden/<name>.safetensors (see OpenPath).
func Open(name string) (*File, error) {
	path, err := Path(name + ".safetensors")
	if err != nil {
		return nil, err
	}
	return OpenPath(path)
}

// OpenPath opens the golden file at path and checks its layout: the
// metadata holds every global, every tensor is named <case>/<role> and
// belongs to a case with parameters, and every other metadata key names a
// case with tensors.
func OpenPath(path string) (*File, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	meta := f.Metadata()
	for _, k := range Globals {
		if _, ok := meta[k]; !ok {
			return nil, fmt.Errorf("golden %s: metadata has no %q: not written by a script of testdata/reference?", path, k)
		}
	}
	withTensors := map[string]bool{}
	for _, n := range f.Tensors() {
		c, _, ok := strings.Cut(n, "/")
		if !ok {
			return nil, fmt.Errorf("golden %s: tensor %q is not named <case>/<role>", path, n)
		}
		withTensors[c] = true
	}
	var names []string
	for c := range withTensors {
		if _, ok := meta[c]; !ok {
			return nil, fmt.Errorf("golden %s: case %q has tensors but no parameters in the metadata", path, c)
		}
		names = append(names, c)
	}
	for k := range meta {
		if !withTensors[k] && !slices.Contains(Globals, k) {
			return nil, fmt.Errorf("golden %s: metadata key %q names no case with tensors", path, k)
		}
	}
	slices.Sort(names)
	return &File{File: f, path: path, names: names}, nil
}

// Cases decodes the parameters of every case of f into C, by case name.
func Cases[C any](f *File) (map[string]C, error) {
	meta := f.Metadata()
	cases := map[string]C{}
	for _, name := range f.names {
		var c C
		if err := json.Unmarshal([]byte(meta[name]), &c); err != nil {
			return nil, fmt.Errorf("golden %s: case %q: %w", f.path, name, err)
		}
		cases[name] = c
	}
	return cases, nil
}

// Provenance checks that the file was written by PyTorch (its reference
// is "torch <version>") running script, the path of a reference script
// from the repository's root.
func (f *File) Provenance(script string) error {
	meta := f.Metadata()
	if !strings.HasPrefix(meta["reference"], "torch ") {
		return fmt.Errorf("golden %s: reference %q, want torch <version>", f.path, meta["reference"])
	}
	if meta["script"] != script {
		return fmt.Errorf("golden %s: written by %q, want %q", f.path, meta["script"], script)
	}
	return nil
}

// Op returns the names of the cases whose parameters have "op": op,
// sorted.
func (f *File) Op(op string) ([]string, error) {
	cases, err := Cases[struct {
		Op string `json:"op"`
	}](f)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range f.names {
		if cases[name].Op == op {
			out = append(out, name)
		}
	}
	return out, nil
}

// Raw returns the tensor "<name>/<role>", which must be of the safetensors
// dtype dtype, undecoded.
func (f *File) Raw(name, role, dtype string) (safetensors.Tensor, error) {
	t, err := f.Tensor(name + "/" + role)
	if err != nil {
		return safetensors.Tensor{}, fmt.Errorf("golden %s: role %q: %w", f.path, role, err)
	}
	if t.DType != dtype {
		return safetensors.Tensor{}, fmt.Errorf("golden %s: role %q of case %q is %s, want %s", f.path, role, name, t.DType, dtype)
	}
	return t, nil
}

// Canonical checks that the file at f's path is byte for byte the
// serialization safetensors.Write gives its tensors and metadata, which
// the reference scripts' writer and ours agree on.
func (f *File) Canonical() error {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("golden: %w", err)
	}
	var tensors []safetensors.Tensor
	for _, n := range f.Tensors() {
		t, err := f.Tensor(n)
		if err != nil {
			return fmt.Errorf("golden %s: %w", f.path, err)
		}
		tensors = append(tensors, t)
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, f.Metadata()); err != nil {
		return fmt.Errorf("golden %s: %w", f.path, err)
	}
	if !bytes.Equal(b, buf.Bytes()) {
		return fmt.Errorf("golden %s differs from its canonical serialization", f.path)
	}
	return nil
}

// ReadParams decodes the JSON parameters of case name, in f's metadata,
// into params, refusing unknown fields; it returns the JSON and its keys.
func ReadParams(f *safetensors.File, name string, params any) (string, map[string]json.RawMessage, error) {
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

// CheckKeys checks that a case's parameters raw (with keys) hold exactly
// op, dtype and the parameters op takes.
func CheckKeys(raw, op string, keys map[string]json.RawMessage, params []string) error {
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

// CheckRoles checks that every tensor of case name is one of roles (of
// the op described by what).
func CheckRoles(f *safetensors.File, name, what string, roles []string) error {
	for _, n := range f.Tensors() {
		if role, ok := strings.CutPrefix(n, name+"/"); ok && !slices.Contains(roles, role) {
			return fmt.Errorf("unexpected tensor %q: op %s has roles %v", n, what, roles)
		}
	}
	return nil
}

// Role is one role of a case as stored in a golden file.
type Role struct {
	Shape kernels.Shape
	DType kernels.DType // storage dtype in the file
	F32   []float32     // float roles
	I32   []int32       // I32 roles
}

// Values returns the role's values as float64.
func (r Role) Values() []float64 {
	if r.DType == kernels.I32 {
		out := make([]float64, len(r.I32))
		for i, x := range r.I32 {
			out[i] = float64(x)
		}
		return out
	}
	return Widen(r.F32)
}

// ReadRole reads the tensor "<name>/<role>" of a golden file, which must
// be of dtype want and have a valid shape.
func ReadRole(f *safetensors.File, name, role string, want kernels.DType) (Role, error) {
	t, err := f.Tensor(name + "/" + role)
	if err != nil {
		return Role{}, fmt.Errorf("role %q: %w", role, err)
	}
	got, err := t.KernelDType()
	if err != nil || got != want {
		return Role{}, fmt.Errorf("role %q is %s, want %v", role, t.DType, want)
	}
	r := Role{Shape: kernels.Shape(t.Shape), DType: got}
	if got == kernels.I32 {
		r.I32, err = t.Int32()
	} else {
		r.F32, err = t.Float32()
	}
	if err != nil {
		return Role{}, fmt.Errorf("role %q: %w", role, err)
	}
	if err := r.Shape.Validate(); err != nil {
		return Role{}, fmt.Errorf("role %q: %w", role, err)
	}
	return r, nil
}

// Widen converts v to float64.
func Widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// Compare checks got against its reference want: equal element for
// element where tol is 0 (NaN matching NaN), within tol on the relative
// error ‖got−want‖/‖want‖ otherwise (a NaN error fails). Where want holds
// NaN or an infinity, got must hold the same in the same place, and only
// the finite values enter the relative error. The error gives the
// relative error, the tolerance and the largest absolute difference, or
// the first element that differs.
func Compare(got, want []float64, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	if tol == 0 {
		for i := range want {
			if got[i] != want[i] && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
				return fmt.Errorf("differs at %d: got %v, want %v", i, got[i], want[i])
			}
		}
		return nil
	}
	g, w := got, want
	if slices.ContainsFunc(want, nonFinite) {
		g, w = nil, nil
		for i, x := range want {
			if nonFinite(x) {
				if !(math.IsNaN(x) && math.IsNaN(got[i]) || x == got[i]) {
					return fmt.Errorf("[%d] = %v, want %v", i, got[i], x)
				}
				continue
			}
			g, w = append(g, got[i]), append(w, x)
		}
	}
	rel, maxAbs := kernels.RelErr(g, w)
	if !(rel <= tol) { // NaN fails too
		return fmt.Errorf("rel-err %.3g > tolerance %.3g, max-abs %.3g", rel, tol, maxAbs)
	}
	return nil
}

func nonFinite(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }
