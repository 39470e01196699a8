// Package golden opens the golden files of testdata/golden, which the
// PyTorch scripts of testdata/reference write, for the tests of every
// package: the file's provenance checked and each case's parameters
// decoded from its metadata.
package golden

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zbench/zbench/models/safetensors"
)

// Globals are the metadata keys of a golden file that describe the file
// rather than one of its cases.
var Globals = []string{"format", "reference", "script", "seed"}

// A Case is one case's parameters; CaseOp names the op it tests.
type Case interface{ CaseOp() string }

// File is an opened golden file and its cases' parameters by name.
type File[C Case] struct {
	*safetensors.File
	Cases map[string]C
}

// Open opens the golden file at path, checks that torch wrote it through
// script (its "reference" and "script" metadata), and decodes its cases.
// Errors say how to regenerate the file.
func Open[C Case](path, script string) (*File[C], error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w (regenerate with /usr/bin/python3 %s)", err, script)
	}
	meta := f.Metadata()
	if !strings.HasPrefix(meta["reference"], "torch ") || meta["script"] != script {
		return nil, fmt.Errorf("%s: written by %q with %q, want %s with torch", path, meta["script"], meta["reference"], script)
	}
	cases, err := Cases[C](f)
	if err != nil {
		return nil, err
	}
	return &File[C]{File: f, Cases: cases}, nil
}

// Cases decodes the parameters of every case of f, each metadata entry
// other than Globals being a case's name and its parameters as a JSON
// object, into C by name.
func Cases[C any](f *safetensors.File) (map[string]C, error) {
	cases := map[string]C{}
	for name, v := range f.Metadata() {
		if slices.Contains(Globals, name) {
			continue
		}
		var c C
		if err := json.Unmarshal([]byte(v), &c); err != nil {
			return nil, fmt.Errorf("%s: metadata %q: %w", f.Name(), name, err)
		}
		cases[name] = c
	}
	return cases, nil
}

// Names returns the names of the cases of op, sorted.
func (f *File[C]) Names(op string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(f.Cases)) {
		if f.Cases[name].CaseOp() == op {
			out = append(out, name)
		}
	}
	return out
}
