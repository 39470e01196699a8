package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bertTiny is a checkpoint directory as Hugging Face writes it.
const bertTiny = "../../testdata/golden/bert-tiny"

// touch creates the named files in dir, each holding data.
func touch(t *testing.T, dir string, data string, names ...string) {
	t.Helper()
	for _, n := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(data), 0o644))
	}
}

const index = `{"metadata": {"total_size": 8}, "weight_map": {
	"a.weight": "model-00001-of-00002.safetensors",
	"b.weight": "model-00002-of-00002.safetensors",
	"c.weight": "model-00001-of-00002.safetensors"}}`

func TestResolve(t *testing.T) {
	sharded := t.TempDir()
	touch(t, sharded, "{}", ConfigName)
	touch(t, sharded, index, IndexName)
	touch(t, sharded, "", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
	shards := []string{filepath.Join(sharded, "model-00001-of-00002.safetensors"), filepath.Join(sharded, "model-00002-of-00002.safetensors")}

	override := filepath.Join(t.TempDir(), "other.json")
	touch(t, filepath.Dir(override), "{}", "other.json")

	for _, tc := range []struct {
		name            string
		weights, config string
		want            Files
	}{
		{name: "directory", weights: bertTiny,
			want: Files{Config: filepath.Join(bertTiny, ConfigName), Weights: []string{filepath.Join(bertTiny, WeightsName)}}},
		{name: "file", weights: filepath.Join(bertTiny, WeightsName),
			want: Files{Config: filepath.Join(bertTiny, ConfigName), Weights: []string{filepath.Join(bertTiny, WeightsName)}}},
		{name: "directory, config overridden", weights: bertTiny, config: override,
			want: Files{Config: override, Weights: []string{filepath.Join(bertTiny, WeightsName)}}},
		{name: "sharded directory", weights: sharded,
			want: Files{Config: filepath.Join(sharded, ConfigName), Weights: shards, Index: filepath.Join(sharded, IndexName)}},
		{name: "index file", weights: filepath.Join(sharded, IndexName),
			want: Files{Config: filepath.Join(sharded, ConfigName), Weights: shards, Index: filepath.Join(sharded, IndexName)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.weights, tc.config)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, len(tc.want.Weights) > 1, got.Sharded())
		})
	}
}

func TestResolveErrors(t *testing.T) {
	noConfig := t.TempDir()
	touch(t, noConfig, "", WeightsName)
	noWeights := t.TempDir()
	touch(t, noWeights, "{}", ConfigName, "pytorch_model.bin")
	missingShard := t.TempDir()
	touch(t, missingShard, "{}", ConfigName)
	touch(t, missingShard, index, IndexName)
	touch(t, missingShard, "", "model-00001-of-00002.safetensors")
	badIndex := t.TempDir()
	touch(t, badIndex, `{"weight_map": {"a": "../x.safetensors"}}`, IndexName)

	for _, tc := range []struct {
		name            string
		weights, config string
		want            string
		missing         bool // wraps ErrMissing
	}{
		{name: "no such weights", weights: filepath.Join(noConfig, "nope"), want: "weights " + filepath.Join(noConfig, "nope") + ": no such file or directory"},
		{name: "no config in the directory", weights: noConfig, missing: true,
			want: "config " + filepath.Join(noConfig, ConfigName) + ": no config.json beside the weights (give --config)"},
		{name: "no config beside the file", weights: filepath.Join(noConfig, WeightsName), missing: true,
			want: "config " + filepath.Join(noConfig, ConfigName) + ": no config.json beside the weights"},
		{name: "no such override", weights: bertTiny, config: filepath.Join(noConfig, "c.json"),
			want: "config " + filepath.Join(noConfig, "c.json") + ": no such file or directory"},
		{name: "no weights in the directory", weights: noWeights, missing: true,
			want: "weights " + noWeights + ": no model.safetensors or model.safetensors.index.json in the directory"},
		{name: "a shard missing", weights: missingShard, missing: true,
			want: "weights index " + filepath.Join(missingShard, IndexName) + ": 1 of 2 shards missing in " + missingShard + ": model-00002-of-00002.safetensors"},
		{name: "shard outside the directory", weights: badIndex,
			want: `tensor "a": shard "../x.safetensors" is not a file name in the index's directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(tc.weights, tc.config)
			require.ErrorContains(t, err, tc.want)
			assert.Equal(t, tc.missing, errors.Is(err, ErrMissing), err.Error())
		})
	}
}

func TestParseIndex(t *testing.T) {
	got, err := ParseIndex([]byte(index))
	require.NoError(t, err)
	assert.Equal(t, []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}, got)
	for _, bad := range []string{``, `[]`, `{}`, `{"weight_map": {}}`, `{"weight_map": {"a": ""}}`, `{"weight_map": {"a": "d/x"}}`, `{"weight_map": {"a": ".."}}`} {
		_, err := ParseIndex([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(index))
	f.Add([]byte(`{"weight_map": {"a": "x.safetensors"}}`))
	f.Add([]byte(`{"weight_map": {"a": "../x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		shards, err := ParseIndex(data)
		if err != nil {
			return
		}
		require.NotEmpty(t, shards)
		for i, s := range shards {
			assert.Equal(t, filepath.Base(s), s, "a shard is a plain file name")
			assert.NotContains(t, []string{"", ".", ".."}, s)
			if i > 0 {
				assert.Less(t, shards[i-1], s, "sorted, without repeats")
			}
		}
	})
}
