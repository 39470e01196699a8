// Package checkpoint finds the files of a model checkpoint laid out as
// Hugging Face stores one: a directory holding config.json and the
// weights, either one model.safetensors or shards
// model-00001-of-0000N.safetensors listed in model.safetensors.index.json
// (its "weight_map" maps every tensor name to the shard holding it).
//
// Resolve takes what a user names on a command line, the directory or one
// of its weight files, and returns the paths of the config and of every
// weight file, so that each model reads its checkpoint the same way.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// File names of a Hugging Face checkpoint directory.
const (
	// ConfigName is the model's configuration.
	ConfigName = "config.json"
	// WeightsName is the weights of an unsharded checkpoint.
	WeightsName = "model.safetensors"
	// IndexName lists the shards of a sharded checkpoint.
	IndexName = "model.safetensors.index.json"
)

// ErrMissing is wrapped by the error for a checkpoint that lacks its
// config or weights.
var ErrMissing = errors.New("missing checkpoint file")

// Files are the resolved files of a checkpoint.
type Files struct {
	// Config is the path of config.json (or of the override given).
	Config string
	// Weights are the safetensors files: one for model.safetensors, or
	// every shard in the order of their names.
	Weights []string
	// Index is the path of model.safetensors.index.json for a sharded
	// checkpoint, "" otherwise.
	Index string
}

// Sharded reports whether the weights are split over several files.
func (f Files) Sharded() bool { return len(f.Weights) > 1 }

// Resolve finds the files of the checkpoint at weights, which is one of
//
//   - a checkpoint directory: its model.safetensors, or else the shards
//     its model.safetensors.index.json lists;
//   - a safetensors file: that file alone;
//   - an index file (*.safetensors.index.json): the shards it lists.
//
// config, when not empty, overrides the checkpoint's config.json, which is
// otherwise the one in the directory (beside the file, when weights is a
// file). Every file returned exists; a missing one gives an error wrapping
// ErrMissing that names it.
func Resolve(weights, config string) (Files, error) {
	f, dir, err := resolveWeights(weights)
	if err != nil {
		return Files{}, err
	}
	f.Config = config
	if config == "" {
		f.Config = filepath.Join(dir, ConfigName)
		if !isFile(f.Config) {
			return Files{}, fmt.Errorf("config %s: no %s beside the weights (give --config): %w", f.Config, ConfigName, ErrMissing)
		}
	} else if _, err := os.Stat(config); err != nil {
		return Files{}, fmt.Errorf("config %s: %w", config, pathErr(err))
	}
	return f, nil
}

// ResolveWeights finds the weight files at weights as Resolve does, for
// models whose checkpoints carry no config.json (a torchvision state_dict
// saved as safetensors): Config is left empty.
func ResolveWeights(weights string) (Files, error) {
	f, _, err := resolveWeights(weights)
	return f, err
}

// resolveWeights finds the weight files at weights and the directory
// where its config.json would be.
func resolveWeights(weights string) (f Files, dir string, err error) {
	st, err := os.Stat(weights)
	if err != nil {
		return f, "", fmt.Errorf("weights %s: %w", weights, pathErr(err))
	}
	dir = weights
	switch {
	case st.IsDir():
		one := filepath.Join(dir, WeightsName)
		index := filepath.Join(dir, IndexName)
		switch {
		case isFile(one):
			f.Weights = []string{one}
		case isFile(index):
			if f.Weights, err = readIndex(index); err != nil {
				return Files{}, "", err
			}
			f.Index = index
		default:
			return Files{}, "", fmt.Errorf("weights %s: no %s or %s in the directory: %w", weights, WeightsName, IndexName, ErrMissing)
		}
	case strings.HasSuffix(weights, ".index.json"):
		dir = filepath.Dir(weights)
		if f.Weights, err = readIndex(weights); err != nil {
			return Files{}, "", err
		}
		f.Index = weights
	default:
		dir = filepath.Dir(weights)
		f.Weights = []string{weights}
	}
	return f, dir, nil
}

// readIndex reads the index file at path and returns the paths of its
// shards, sorted, each checked to exist.
func readIndex(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("weights index %s: %w", path, pathErr(err))
	}
	shards, err := ParseIndex(data)
	if err != nil {
		return nil, fmt.Errorf("weights index %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	var missing []string
	for i, s := range shards {
		shards[i] = filepath.Join(dir, s)
		if !isFile(shards[i]) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("weights index %s: %d of %d shards missing in %s: %s: %w",
			path, len(missing), len(shards), dir, strings.Join(missing, ", "), ErrMissing)
	}
	return shards, nil
}

// ParseIndex parses a model.safetensors.index.json and returns the shard
// file names its weight_map refers to, sorted and without repeats. A shard
// name must be a plain file name in the index's directory.
func ParseIndex(data []byte) ([]string, error) {
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("not a safetensors index: %w", err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, errors.New("not a safetensors index: no weight_map")
	}
	var shards []string
	for tensor, s := range idx.WeightMap {
		if s == "" || s != filepath.Base(s) || s == "." || s == ".." || strings.ContainsAny(s, `/\`) {
			return nil, fmt.Errorf("tensor %q: shard %q is not a file name in the index's directory", tensor, s)
		}
		shards = append(shards, s)
	}
	slices.Sort(shards)
	return slices.Compact(shards), nil
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// pathErr drops the path from a *fs.PathError, whose path the caller's
// message already names.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
