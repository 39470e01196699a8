package bert_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels/cpu"
	"github.com/zbench/zbench/models/bert"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

// quantizeTiny loads the tiny checkpoint and quantizes it, calibrated with
// absmax on the tiny inputs.
func quantizeTiny(t *testing.T) (*bert.Model, []quant.LinearReport) {
	t.Helper()
	ck, err := bert.OpenCheckpoint(tinyModel)
	require.NoError(t, err)
	m := loadTiny(t, ck, nn.F32)
	in, batch, seq := tinyInputs(t)
	rep, err := m.Quantize(bert.Calibration{Batches: []bert.Inputs{in}, Batch: batch, Seq: seq,
		NewObserver: func() quant.Observer { return quant.NewAbsMax() }})
	require.NoError(t, err)
	return m, rep
}

// writeQuantized writes m's quantized checkpoint and a config.json with
// its quantization_config into a new directory and returns the weights'
// path; edit, if not nil, changes the config's JSON object first.
func writeQuantized(t *testing.T, tensors []safetensors.Tensor, edit func(map[string]any)) string {
	t.Helper()
	path := writeCheckpoint(t, tensors)
	data, err := os.ReadFile(tinyConfig)
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(data, &cfg))
	qc, err := json.Marshal(quant.NewConfig(quant.Spec{Scheme: quant.W8A8, Method: "absmax", Ignore: bert.QuantIgnored()}))
	require.NoError(t, err)
	var qm map[string]any
	require.NoError(t, json.Unmarshal(qc, &qm))
	cfg["quantization_config"] = qm
	if edit != nil {
		edit(cfg)
	}
	data, err = json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(path), "config.json"), data, 0o644))
	return path
}

// loadQuantized loads the checkpoint written by writeQuantized.
func loadQuantized(t *testing.T, path string) (*bert.Model, error) {
	t.Helper()
	cfg, err := bert.LoadConfig(filepath.Join(filepath.Dir(path), "config.json"))
	if err != nil {
		return nil, err
	}
	ck, err := bert.OpenCheckpoint(path)
	if err != nil {
		return nil, err
	}
	m, err := bert.Load(cpu.New(), cfg, ck, nn.F32)
	if err == nil {
		t.Cleanup(func() { require.NoError(t, m.Close()) })
	}
	return m, err
}

// TestQuantizedCheckpointRoundTrip quantizes the tiny model, writes its
// compressed-tensors checkpoint, loads it back and requires the same
// outputs bit for bit; the report covers every linear.
func TestQuantizedCheckpointRoundTrip(t *testing.T) {
	m, rep := quantizeTiny(t)
	cfg := tinyCfg()
	require.Len(t, rep, 6*cfg.NumHiddenLayers)
	for _, r := range rep {
		assert.Greater(t, r.WeightSQNR, 30.0, r.Name)
		assert.Greater(t, r.InputSQNR, 20.0, r.Name)
	}
	in, batch, seq := tinyInputs(t)
	wantH, wantP := run(t, m, in, batch, seq)

	tensors, err := m.QuantizedTensors()
	require.NoError(t, err)
	dtypes := map[string]string{}
	for _, x := range tensors {
		dtypes[x.Name] = x.DType
	}
	q := "encoder.layer.0.attention.self.query"
	assert.Equal(t, "I8", dtypes[q+".weight"])
	assert.Equal(t, "F32", dtypes[q+".weight_scale"])
	assert.Equal(t, "F32", dtypes[q+".input_scale"])
	assert.Equal(t, "F32", dtypes["pooler.dense.weight"], "the pooler stays float")

	back, err := loadQuantized(t, writeQuantized(t, tensors, nil))
	require.NoError(t, err)
	require.True(t, back.Quantized())
	require.Equal(t, quant.W8A8, back.Config.Quant)
	gotH, gotP := run(t, back, in, batch, seq)
	require.Equal(t, wantH, gotH, "last_hidden_state")
	require.Equal(t, wantP, gotP, "pooler_output")

	ck, err := bert.OpenCheckpoint(tinyModel)
	require.NoError(t, err)
	ref := loadTiny(t, ck, nn.F32)
	refH, _ := run(t, ref, in, batch, seq)
	t.Logf("int8 against float: rel-err %.3g", relErr(gotH, refH))
	assert.Less(t, relErr(gotH, refH), 5e-2)
}

// TestQuantizedCheckpointErrors checks that a checkpoint quantized in
// another way, or with bad tensors, fails to load with an error naming
// the field or tensor.
func TestQuantizedCheckpointErrors(t *testing.T) {
	m, _ := quantizeTiny(t)
	tensors, err := m.QuantizedTensors()
	require.NoError(t, err)
	q := "encoder.layer.0.attention.self.query"
	cases := []struct {
		name   string
		edit   func(map[string]any)
		tensor func(*safetensors.Tensor) bool
		want   string
	}{
		{name: "format", edit: func(c map[string]any) { c["quantization_config"].(map[string]any)["format"] = "pack-quantized" }, want: "input_activations = set, want null in pack-quantized"},
		{name: "ignore", edit: func(c map[string]any) { c["quantization_config"].(map[string]any)["ignore"] = []string{"lm_head"} }, want: "ignores"},
		{name: "dynamic", edit: func(c map[string]any) {
			g := c["quantization_config"].(map[string]any)["config_groups"].(map[string]any)["group_0"].(map[string]any)
			in := g["input_activations"].(map[string]any)
			in["dynamic"], in["strategy"] = true, "token"
		}, want: "w8a8 with dynamic input scales"},
		{name: "float weight", tensor: func(x *safetensors.Tensor) bool {
			if x.Name == q+".weight" {
				x.DType, x.Data = "F32", make([]byte, 4*len(x.Data))
			}
			return true
		}, want: "must be I8"},
		{name: "missing scale", tensor: func(x *safetensors.Tensor) bool { return x.Name != q+".weight_scale" }, want: "weight_scale"},
		{name: "zero input scale", tensor: func(x *safetensors.Tensor) bool {
			if x.Name == q+".input_scale" {
				x.Data = make([]byte, 4)
			}
			return true
		}, want: "input_scale[0] = 0"},
		{name: "key's input scale", tensor: func(x *safetensors.Tensor) bool {
			if x.Name == "encoder.layer.0.attention.self.key.input_scale" {
				x.Data = f32Tensor("", []float32{0.5}, 1).Data
			}
			return true
		}, want: "query, key and value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := tensors
			if c.tensor != nil {
				ts = mapTensors(tensors, c.tensor)
			}
			_, err := loadQuantized(t, writeQuantized(t, ts, c.edit))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err = (&bert.Model{}).QuantizedTensors()
	require.ErrorIs(t, err, bert.ErrInput, "a float model has no quantized tensors")
}

// TestQuantizeErrors checks Quantize's refusals.
func TestQuantizeErrors(t *testing.T) {
	m, _ := quantizeTiny(t)
	_, err := m.Quantize(bert.Calibration{})
	require.ErrorIs(t, err, bert.ErrInput, "already quantized")
	ck, err := bert.OpenCheckpoint(tinyModel)
	require.NoError(t, err)
	f := loadTiny(t, ck, nn.F32)
	_, err = f.Quantize(bert.Calibration{Batch: 1, Seq: 4})
	require.ErrorIs(t, err, bert.ErrInput, "no batches")
	in, batch, seq := tinyInputs(t)
	_, err = f.Quantize(bert.Calibration{Batches: []bert.Inputs{in}, Batch: batch, Seq: seq,
		NewObserver: func() quant.Observer { return zeroObserver{} }})
	require.ErrorIs(t, err, bert.ErrInput, "an observer that clips everything to zero")
	assert.Contains(t, fmt.Sprint(err), "amax 0")
	assert.False(t, f.Quantized(), "nothing is quantized after a failed calibration")
	h, _ := run(t, f, in, batch, seq)
	assert.Len(t, h, batch*seq*tinyCfg().HiddenSize, "the float model still runs")
}

// zeroObserver calibrates every input to amax 0.
type zeroObserver struct{}

func (zeroObserver) Observe([]float32) error { return nil }
func (zeroObserver) Amax() (float32, error)  { return 0, nil }
