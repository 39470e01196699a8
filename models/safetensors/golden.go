package safetensors

import (
	"encoding/json"
	"fmt"
	"slices"
)

// GoldenGlobals are the metadata keys of a golden file (testdata/golden,
// written by the scripts in testdata/reference) that describe the file
// rather than one of its cases.
var GoldenGlobals = []string{"format", "reference", "script", "seed"}

// GoldenCases decodes the parameters of every case of a golden file, each
// metadata entry other than GoldenGlobals being a case's name and its
// parameters as a JSON object, into C by name.
func GoldenCases[C any](f *File) (map[string]C, error) {
	cases := map[string]C{}
	for name, v := range f.metadata {
		if slices.Contains(GoldenGlobals, name) {
			continue
		}
		var c C
		if err := json.Unmarshal([]byte(v), &c); err != nil {
			return nil, fmt.Errorf("safetensors: %s: metadata %q: %w", f.name, name, err)
		}
		cases[name] = c
	}
	return cases, nil
}
