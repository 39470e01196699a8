package lora

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
)

// Adapter is a Config with every target's A and B on the host, float32
// row-major, keyed by their names (Target.AName, Target.BName).
type Adapter struct {
	Config  Config
	Targets []Target
	Tensors map[string][]float32
}

// New returns an adapter of config c on the targets ts (as c.TargetsOf
// lists them) with values from src: Init for a new adapter, or trained
// values.
func New(c Config, ts []Target, src nn.Source) (*Adapter, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	a := &Adapter{Config: c, Targets: slices.Clone(ts), Tensors: map[string][]float32{}}
	for _, p := range c.Params(ts) {
		v, err := src.Values(p)
		if err != nil {
			return nil, err
		}
		if len(v) != p.Len() {
			return nil, fmt.Errorf("%s: %d values for shape %v: %w", p.Name, len(v), p.Shape, nn.ErrWeights)
		}
		a.Tensors[p.Name] = v
	}
	return a, a.check()
}

// Params lists the adapter's parameters, as Config.Params of its targets.
func (a *Adapter) Params() []nn.Param { return a.Config.Params(a.Targets) }

// check verifies that the adapter is one that Load reads back: a valid
// config; targets covering layers 0..L-1 for some L, each with every
// module of the config, each module with one size in every layer; every
// tensor of a target present with its length; no other tensor.
func (a *Adapter) check() error {
	if err := a.Config.Validate(); err != nil {
		return err
	}
	if len(a.Targets) == 0 {
		return fmt.Errorf("LoRA adapter has no targets: %w", nn.ErrWeights)
	}
	layers := 0
	type key struct {
		layer  int
		module string
	}
	seen := map[key]bool{}
	dims := map[string]Target{}
	for _, t := range a.Targets {
		switch d, ok := dims[t.Module]; {
		case !a.Config.Targeted(t.Module):
			return fmt.Errorf("LoRA adapter: target %v is not in target_modules %v: %w", t, a.Config.Targets, ErrConfig)
		case t.Layer < 0:
			return fmt.Errorf("LoRA adapter: target %v: negative layer: %w", t, nn.ErrWeights)
		case t.In <= 0 || t.Out <= 0:
			return fmt.Errorf("LoRA adapter: target %v: size %d×%d: %w", t, t.Out, t.In, nn.ErrWeights)
		case seen[key{t.Layer, t.Module}]:
			return fmt.Errorf("LoRA adapter: target %v twice: %w", t, nn.ErrWeights)
		case ok && (d.In != t.In || d.Out != t.Out):
			return fmt.Errorf("LoRA adapter: target %v is %d×%d but %v is %d×%d: %w", t, t.Out, t.In, d, d.Out, d.In, nn.ErrWeights)
		}
		seen[key{t.Layer, t.Module}] = true
		dims[t.Module] = t
		layers = max(layers, t.Layer+1)
	}
	if len(a.Targets) != layers*len(a.Config.Targets) {
		for l := range layers {
			for _, m := range a.Config.Targets {
				if !seen[key{l, m}] {
					return fmt.Errorf("LoRA adapter: no target for layer %d %s (targets must cover every layer up to %d): %w",
						l, modulePath(m), layers-1, nn.ErrWeights)
				}
			}
		}
	}
	ps := a.Params()
	for _, p := range ps {
		v, ok := a.Tensors[p.Name]
		if !ok {
			return fmt.Errorf("LoRA adapter: no tensor %q: %w", p.Name, nn.ErrWeights)
		}
		if len(v) != p.Len() {
			return fmt.Errorf("LoRA adapter: tensor %q has %d values, shape %v needs %d: %w", p.Name, len(v), p.Shape, p.Len(), nn.ErrWeights)
		}
	}
	if len(a.Tensors) != len(ps) {
		for _, n := range sortedKeys(a.Tensors) {
			if !slices.ContainsFunc(ps, func(p nn.Param) bool { return p.Name == n }) {
				return fmt.Errorf("LoRA adapter: tensor %q belongs to no target: %w", n, nn.ErrWeights)
			}
		}
	}
	return nil
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Save writes dir/adapter_config.json (Config.Marshal) and
// dir/adapter_model.safetensors (every A and B as F32, metadata {"format":
// "pt"}, as PEFT writes them), creating dir. Each file is written
// atomically: to a temporary file in dir, synced, then renamed; the
// weights first, so that a directory with a new config has its weights.
// An adapter that Load could not read back is an error, and nothing is
// written.
func (a *Adapter) Save(dir string) error {
	if err := a.check(); err != nil {
		return err
	}
	cfg, err := a.Config.Marshal()
	if err != nil {
		return err
	}
	var tensors []safetensors.Tensor
	for _, p := range a.Params() {
		v := a.Tensors[p.Name]
		data := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
		}
		tensors = append(tensors, safetensors.Tensor{Name: p.Name, DType: "F32", Shape: p.Shape, Data: data})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("LoRA adapter: %w", err)
	}
	if err := writeAtomic(dir, WeightsFile, func(w io.Writer) error {
		return safetensors.Write(w, tensors, map[string]string{"format": "pt"})
	}); err != nil {
		return err
	}
	return writeAtomic(dir, ConfigFile, func(w io.Writer) error {
		_, err := w.Write(cfg)
		return err
	})
}

// writeAtomic writes dir/name with write through a temporary file in dir,
// synced and renamed into place, and then syncs dir (where the system
// allows). On error the temporary file is removed.
func writeAtomic(dir, name string, write func(io.Writer) error) (err error) {
	path := filepath.Join(dir, name)
	f, err := os.CreateTemp(dir, "."+name+".tmp*")
	if err != nil {
		return fmt.Errorf("LoRA adapter: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close() // already failed; the first error is the one to report
			_ = os.Remove(f.Name())
			err = fmt.Errorf("LoRA adapter: writing %s: %w", path, err)
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: some systems cannot sync a directory
		_ = d.Close()
	}
	return nil
}

// loadDTypes are the dtypes Load converts to float32.
var loadDTypes = map[string]bool{"F32": true, "F16": true, "BF16": true, "F64": true}

// Load reads the adapter in dir (adapter_config.json, see ReadConfig, and
// adapter_model.safetensors) for a model of the given number of decoder
// layers whose module sizes dims gives. Every A and B of the config's
// targets in every layer must be in the file with its shape, as F32, F16,
// BF16 or F64 (converted to float32); a missing, extra or mis-shaped tensor
// is an error naming the file and tensor, wrapping nn.ErrWeights, and so
// is a tensor of a layer beyond the model's.
func Load(dir string, layers int, dims func(module string) (in, out int)) (*Adapter, error) {
	c, err := ReadConfig(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	if layers <= 0 {
		return nil, fmt.Errorf("LoRA adapter %s: a model of %d layers: %w", dir, layers, nn.ErrWeights)
	}
	for _, m := range c.Targets {
		if in, out := dims(m); in <= 0 || out <= 0 {
			return nil, fmt.Errorf("LoRA adapter %s: the model's %s is %d×%d: %w", dir, m, out, in, nn.ErrWeights)
		}
	}
	path := filepath.Join(dir, WeightsFile)
	f, err := safetensors.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, e := os.Stat(filepath.Join(dir, "adapter_model.bin")); e == nil {
				return nil, fmt.Errorf("LoRA adapter %s: only adapter_model.bin (a pickle), which is not supported; save the adapter with safe_serialization=True: %w", dir, nn.ErrWeights)
			}
		}
		return nil, fmt.Errorf("LoRA adapter: %w", err)
	}
	a := &Adapter{Config: c, Targets: c.TargetsOf(layers, dims), Tensors: map[string][]float32{}}
	for _, p := range a.Params() {
		t, err := f.Tensor(p.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: missing tensor %q (%s targets %s in %d layers): %w",
				path, p.Name, ConfigFile, strings.Join(c.Targets, ", "), layers, nn.ErrWeights)
		}
		if !slices.Equal(t.Shape, p.Shape) {
			return nil, fmt.Errorf("%s: tensor %q has shape %v, want %v (r = %d): %w", path, p.Name, t.Shape, p.Shape, c.R, nn.ErrWeights)
		}
		if !loadDTypes[t.DType] {
			return nil, fmt.Errorf("%s: tensor %q has dtype %s, want F32, F16, BF16 or F64: %w", path, p.Name, t.DType, nn.ErrWeights)
		}
		v, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		a.Tensors[p.Name] = v
	}
	for _, name := range f.Tensors() {
		if _, ok := a.Tensors[name]; ok {
			continue
		}
		if n, ok := parseName(name); ok && n.layer >= layers {
			return nil, fmt.Errorf("%s: tensor %q is of layer %d, the model has %d layers: %w", path, name, n.layer, layers, nn.ErrWeights)
		}
		return nil, fmt.Errorf("%s: tensor %q is not one of %s's targets (%s): %w",
			path, name, ConfigFile, strings.Join(c.Targets, ", "), nn.ErrWeights)
	}
	return a, nil
}

// adapterSource is the Source of Adapter.Source.
type adapterSource struct {
	a      *Adapter
	shapes map[string][]int
}

// Source returns the adapter's tensors as an nn.Source, for nn.LoadParams
// or nn.NewTrainState. Values returns a copy; a parameter that is not an A
// or B of the adapter's targets, or whose shape differs, is an error
// wrapping nn.ErrWeights.
func (a *Adapter) Source() nn.Source {
	s := adapterSource{a: a, shapes: map[string][]int{}}
	for _, p := range a.Params() {
		s.shapes[p.Name] = p.Shape
	}
	return s
}

// Values implements nn.Source.
func (s adapterSource) Values(p nn.Param) ([]float32, error) {
	shape, ok := s.shapes[p.Name]
	if !ok {
		return nil, fmt.Errorf("LoRA adapter: no tensor %q: %w", p.Name, nn.ErrWeights)
	}
	if !slices.Equal(shape, p.Shape) {
		return nil, fmt.Errorf("LoRA adapter: tensor %q has shape %v, wanted %v: %w", p.Name, shape, p.Shape, nn.ErrWeights)
	}
	v, ok := s.a.Tensors[p.Name]
	if !ok || len(v) != p.Len() {
		return nil, fmt.Errorf("LoRA adapter: tensor %q: %d values for shape %v: %w", p.Name, len(v), shape, nn.ErrWeights)
	}
	return slices.Clone(v), nil
}

// Merge folds target t into its base weight w ([Out, In], row-major):
// w += Scale·B·A, each element computed in float64 (the sum over the rank
// in order) and rounded to float32 once. t must be one of the adapter's
// targets and w of its size.
func (a *Adapter) Merge(t Target, w []float32) error {
	if !slices.Contains(a.Targets, t) {
		return fmt.Errorf("LoRA merge: %v (%d×%d) is not a target of the adapter: %w", t, t.Out, t.In, nn.ErrWeights)
	}
	r := a.Config.R
	A, B := a.Tensors[t.AName()], a.Tensors[t.BName()]
	switch {
	case len(w) != t.Out*t.In:
		return fmt.Errorf("LoRA merge: %s has %d values, want %d×%d: %w", t.BaseName(), len(w), t.Out, t.In, nn.ErrWeights)
	case len(A) != r*t.In:
		return fmt.Errorf("LoRA merge: tensor %q has %d values, want %d×%d: %w", t.AName(), len(A), r, t.In, nn.ErrWeights)
	case len(B) != t.Out*r:
		return fmt.Errorf("LoRA merge: tensor %q has %d values, want %d×%d: %w", t.BName(), len(B), t.Out, r, nn.ErrWeights)
	}
	scale := a.Config.Scale()
	row := make([]float64, t.In)
	for o := range t.Out {
		clear(row)
		for k, b := range B[o*r : (o+1)*r] {
			for i, x := range A[k*t.In : (k+1)*t.In] {
				// The conversion keeps the product from being fused
				// with the sum, so that every platform rounds alike.
				row[i] += float64(float64(b) * float64(x))
			}
		}
		wo := w[o*t.In : (o+1)*t.In]
		for i, s := range row {
			wo[i] = float32(float64(wo[i]) + float64(scale*s))
		}
	}
	return nil
}

// mergedSource is the Source of Adapter.Merged.
type mergedSource struct {
	a      *Adapter
	base   nn.Source
	target map[string]Target
}

// Merged returns base's weights with the adapter merged into those of its
// targets (see Merge); other parameters pass through. It does not check
// for unused tensors of a checkpoint as nn.LoadParams does with a
// *nn.Checkpoint: call its CheckUnused after loading.
func (a *Adapter) Merged(base nn.Source) nn.Source {
	m := mergedSource{a: a, base: base, target: map[string]Target{}}
	for _, t := range a.Targets {
		m.target[t.BaseName()] = t
	}
	return m
}

// Values implements nn.Source.
func (m mergedSource) Values(p nn.Param) ([]float32, error) {
	v, err := m.base.Values(p)
	if err != nil {
		return nil, err
	}
	t, ok := m.target[p.Name]
	if !ok {
		return v, nil
	}
	if !slices.Equal(p.Shape, []int{t.Out, t.In}) {
		return nil, fmt.Errorf("LoRA merge: %s has shape %v, the adapter's %v wants [%d %d]: %w", p.Name, p.Shape, t, t.Out, t.In, nn.ErrWeights)
	}
	v = slices.Clone(v) // the base may share its values
	if err := m.a.Merge(t, v); err != nil {
		return nil, err
	}
	return v, nil
}
