package nn

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zbench/zbench/models/safetensors"
)

// Names maps a model's parameters to the tensors of its checkpoints.
type Names struct {
	// Model names the model in messages ("bert", "llama"): every error of
	// a Checkpoint begins with it.
	Model string
	// Candidates returns the tensor names to try for a parameter, in
	// order: prefixed forms, legacy aliases (LayerNorm.gamma for
	// LayerNorm.weight). The first is the one a missing tensor's error
	// names. Nil means the parameter's own name only.
	Candidates func(param string) []string
	// Ignored reports whether a tensor of the files that no parameter
	// read may stay unread: heads of other tasks, buffers the model
	// computes itself (position ids, rotary inv_freq). Nil ignores none.
	Ignored func(name string) bool
}

// errorf formats an error prefixed with the model's name.
func (n Names) errorf(format string, args ...any) error {
	if n.Model != "" {
		format = n.Model + ": " + format
	}
	return fmt.Errorf(format, args...)
}

// candidates are the tensor names to try for param.
func (n Names) candidates(param string) []string {
	if n.Candidates == nil {
		return []string{param}
	}
	return n.Candidates(param)
}

// Checkpoint is a Source reading the tensors of one safetensors file or of
// the shards of a sharded checkpoint (as models/checkpoint's Resolve finds
// them), under a model's Names. Every tensor must be in exactly one file.
type Checkpoint struct {
	names Names
	files []*safetensors.File
	file  map[string]int // tensor name → index in files
	used  map[string]bool
}

// floatDTypes are the safetensors dtypes weights may be stored in.
var floatDTypes = map[string]bool{"F64": true, "F32": true, "F16": true, "BF16": true, "F8_E4M3": true, "F8_E5M2": true}

// OpenCheckpoint reads the safetensors files at paths, the one file of a
// checkpoint or all its shards.
func OpenCheckpoint(paths []string, n Names) (*Checkpoint, error) {
	files, err := OpenFiles(paths)
	if err != nil {
		return nil, n.errorf("%w", err)
	}
	return NewCheckpoint(files, n)
}

// OpenFiles reads and validates the safetensors files at paths, for
// NewCheckpoint. Errors name the file.
func OpenFiles(paths []string) ([]*safetensors.File, error) {
	files := make([]*safetensors.File, len(paths))
	for i, p := range paths {
		f, err := safetensors.Open(p)
		if err != nil {
			return nil, err
		}
		files[i] = f
	}
	return files, nil
}

// NewCheckpoint wraps parsed safetensors files. A tensor name found in two
// files is an error wrapping ErrWeights.
func NewCheckpoint(files []*safetensors.File, n Names) (*Checkpoint, error) {
	c := &Checkpoint{names: n, files: files, file: map[string]int{}, used: map[string]bool{}}
	if len(files) == 0 {
		return nil, n.errorf("a checkpoint needs a safetensors file, got none: %w", ErrWeights)
	}
	for i, f := range files {
		for _, t := range f.Tensors() {
			if j, dup := c.file[t]; dup {
				return nil, n.errorf("tensor %q is in two files, %s and %s: %w", t, fileName(files[j]), fileName(f), ErrWeights)
			}
			c.file[t] = i
		}
	}
	return c, nil
}

// fileName names f in messages.
func fileName(f *safetensors.File) string {
	if f.Name() != "" {
		return f.Name()
	}
	return "checkpoint"
}

// String names the checkpoint in messages: its file, or its shards' count
// and directory.
func (c *Checkpoint) String() string {
	if len(c.files) == 1 {
		return fileName(c.files[0])
	}
	dir := filepath.Dir(c.files[0].Name())
	for _, f := range c.files {
		if f.Name() == "" || filepath.Dir(f.Name()) != dir {
			return fmt.Sprintf("checkpoint of %d shards", len(c.files))
		}
	}
	return fmt.Sprintf("%d shards in %s", len(c.files), dir)
}

// find returns the tensor holding param and the file it is in, or an error
// naming the first candidate when no candidate is in the files.
func (c *Checkpoint) find(param string) (safetensors.Tensor, *safetensors.File, error) {
	names := c.names.candidates(param)
	for _, name := range names {
		if i, ok := c.file[name]; ok {
			f := c.files[i]
			t, err := f.Tensor(name)
			if err != nil {
				return t, f, c.names.errorf("%w", err)
			}
			return t, f, nil
		}
	}
	first := param
	if len(names) > 0 {
		first = names[0]
	}
	return safetensors.Tensor{}, nil, c.names.errorf("%v: missing tensor %q (check config.json matches the weights): %w", c, first, ErrWeights)
}

// DType returns the safetensors dtype ("F32", "BF16", ...) the named
// parameter is stored in.
func (c *Checkpoint) DType(param string) (string, error) {
	t, _, err := c.find(param)
	return t.DType, err
}

// Shape returns the shape of the tensor holding the named parameter, for
// models that take a size from their weights (a classifier's classes).
func (c *Checkpoint) Shape(param string) ([]int, error) {
	t, _, err := c.find(param)
	return t.Shape, err
}

// Values implements Source: the tensor of the first of p's candidate names
// found, which must have p's shape and a floating-point dtype.
func (c *Checkpoint) Values(p Param) ([]float32, error) {
	return c.values(p, func(dt string) bool { return floatDTypes[dt] }, "weights must be floating point")
}

// Int8Values is Values for a parameter stored as int8 (a quantized
// checkpoint's weight): the tensor must have p's shape and dtype I8, and
// its values are returned widened, exactly, to float32.
func (c *Checkpoint) Int8Values(p Param) ([]float32, error) {
	return c.values(p, func(dt string) bool { return dt == "I8" }, "the quantized checkpoint's weights must be I8")
}

// Tensor returns p's tensor as stored, for a quantized checkpoint's packed
// codes and index tensors: it must have p's shape and one of dtypes
// (safetensors names, "I32", "I64", ...). It is marked used.
func (c *Checkpoint) Tensor(p Param, dtypes ...string) (safetensors.Tensor, error) {
	t, _, err := c.lookup(p, func(dt string) bool { return slices.Contains(dtypes, dt) }, "want "+strings.Join(dtypes, " or "))
	return t, err
}

// lookup returns p's tensor and its file, requiring p's shape and a dtype
// that ok accepts (want says which, in the error), and marks it used.
func (c *Checkpoint) lookup(p Param, ok func(dtype string) bool, want string) (safetensors.Tensor, *safetensors.File, error) {
	t, f, err := c.find(p.Name)
	if err != nil {
		return t, f, err
	}
	if !slices.Equal(t.Shape, p.Shape) {
		return t, f, c.names.errorf("%s: tensor %q has shape %v, the config wants %v: %w",
			fileName(f), t.Name, t.Shape, p.Shape, ErrWeights)
	}
	if !ok(t.DType) {
		return t, f, c.names.errorf("%s: tensor %q has dtype %s; %s: %w", fileName(f), t.Name, t.DType, want, ErrWeights)
	}
	c.used[t.Name] = true
	return t, f, nil
}

// values reads p's tensor widened to float32, requiring p's shape and a
// dtype that ok accepts (want says which, in the error), and marks it
// used.
func (c *Checkpoint) values(p Param, ok func(dtype string) bool, want string) ([]float32, error) {
	t, f, err := c.lookup(p, ok, want)
	if err != nil {
		return nil, err
	}
	v, err := t.Float32()
	if err != nil {
		return nil, c.names.errorf("%s: %w", fileName(f), err)
	}
	return v, nil
}

// CheckUnused returns an error naming the first tensor, in the order of
// the files and then of the names, that no Values call read and that the
// Names do not let stay unread: a tensor the config has no place for (a
// 24-layer checkpoint with a 12-layer config, say).
func (c *Checkpoint) CheckUnused() error {
	for _, f := range c.files {
		for _, n := range f.Tensors() {
			if !c.used[n] && (c.names.Ignored == nil || !c.names.Ignored(n)) {
				return c.names.errorf("%s: tensor %q is not used by the config (check config.json matches the weights): %w",
					fileName(f), n, ErrWeights)
			}
		}
	}
	return nil
}
