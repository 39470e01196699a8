package bench_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/gpt2"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/zbench"
)

// Files and seeds of testdata/reference/gpt2.py (make golden).
const (
	gpt2Golden = "../testdata/golden/gpt2.safetensors"
	// gpt2Case is the golden case of GPT-2 small's shape, whose seed the
	// benchmarks' synthetic weights share.
	gpt2Case = "small"
)

// gpt2Tolerances are the rel-err each dtype's logits must reach against
// the float64 reference: bf16 has the kernels' bf16 tolerance (GPT-2
// small's 12 layers: 1.2e-2), int8 (W8A8 dynamic, float32 around it on
// CPUs and float16 on GPUs) five times the int8 matmul's (2.7e-2).
var gpt2Tolerances = map[string]float64{"f32": 1e-4, "f16": 1e-2, "bf16": kernels.Tolerance(kernels.BF16), "int8": 5e-2}

// gpt2Reference is the golden case the benchmarks check: input_ids
// [batch, seq] and the last position's logits of each sequence.
type gpt2Reference struct {
	Seed       uint64 `json:"seed"`
	Positions  string `json:"positions"`
	batch, seq int
	ids        []int32
	logits     []float32
}

// loadGPT2Reference reads the golden case gpt2Case.
func loadGPT2Reference() (*gpt2Reference, error) {
	f, err := safetensors.Open(gpt2Golden)
	if err != nil {
		return nil, err
	}
	r := &gpt2Reference{}
	if err := json.Unmarshal([]byte(f.Metadata()[gpt2Case]), r); err != nil {
		return nil, fmt.Errorf("%s: case %s: %w", gpt2Golden, gpt2Case, err)
	}
	if r.Positions != "last" {
		return nil, fmt.Errorf("%s: case %s holds the logits of positions %q, want last", gpt2Golden, gpt2Case, r.Positions)
	}
	var shape []int
	if r.ids, shape, err = int32s(f, gpt2Case+"/input_ids"); err != nil {
		return nil, err
	}
	r.batch, r.seq = shape[0], shape[1]
	if r.logits, err = float32s(f, gpt2Case+"/logits"); err != nil {
		return nil, err
	}
	return r, nil
}

// relErr returns the rel-err of the last positions' logits of runner r,
// which ran the reference's inputs.
func (g *gpt2Reference) relErr(r nn.Runner) (float64, error) {
	out, err := r.Outputs()
	if err != nil {
		return 0, err
	}
	logits := out[0].F32
	V := out[0].Shape[2]
	var last []float32
	for b := range g.batch {
		row := logits[((b+1)*g.seq-1)*V:][:V]
		if i := slices.IndexFunc(row, func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }); i >= 0 {
			return 0, fmt.Errorf("logits[%d, %d, %d] = %v", b, g.seq-1, i, row[i])
		}
		last = append(last, row...)
	}
	rel, _ := kernels.RelErr(widen(last), widen(g.logits))
	return rel, nil
}

// inputs returns the reference's inputs, or seeded random ids where the
// shape is another.
func (g *gpt2Reference) inputs(batch, seq, vocab int) map[string]nn.Values {
	ids := g.ids
	if batch != g.batch || seq != g.seq {
		ids = make([]int32, batch*seq)
		for i, u := range uniform(uint64(batch*1000+seq), kernels.F32, len(ids)) {
			ids[i] = int32((u + 1) / 2 * float32(vocab-1))
		}
	}
	return map[string]nn.Values{"input_ids": {Shape: []int{batch, seq}, I32: ids}}
}

// gpt2Shapes are BenchmarkGPT2's (batch, seq) points on dev.
func gpt2Shapes(dev kernels.Backend) [][2]int {
	if dev.Info().Kind == kernels.GPU && !testing.Short() {
		return [][2]int{{1, 128}, {8, 128}, {32, 128}, {8, 1024}}
	}
	return [][2]int{{1, 128}}
}

// gpt2DTypes are BenchmarkGPT2's dtypes on dev: f32 alone in -short mode,
// int8 on devices with kernels.Quant.
func gpt2DTypes(dev kernels.Backend) []string {
	if testing.Short() {
		return []string{"f32"}
	}
	dts := []string{"f32", "f16", "bf16"}
	if _, err := kernels.Group[kernels.Quant](dev); err == nil {
		dts = append(dts, "int8")
	}
	return dts
}

// loadGPT2 loads GPT-2 small with the reference's synthetic weights on dev
// in dtype: a precision, or int8 (the W8A8 dynamic model of
// gpt2.Model.Quantize, float32 around its products on CPUs and float16 on
// GPUs).
func loadGPT2(dev kernels.Backend, dtype string, seed uint64) (*gpt2.Model, error) {
	prec := nn.F32
	if dtype == "int8" && dev.Info().Kind == kernels.GPU {
		prec = nn.F16
	} else if dtype != "int8" {
		var err error
		if prec, err = nn.ParsePrecision(dtype); err != nil {
			return nil, err
		}
	}
	m, err := gpt2.Load(dev, gpt2.Small(), gpt2.Synthetic(seed), prec)
	if err != nil {
		return nil, err
	}
	if dtype == "int8" {
		if _, err := m.Quantize(); err != nil {
			return nil, errors.Join(err, m.Close())
		}
	}
	return m, nil
}

// BenchmarkGPT2 is GPT-2 small (GPT2LMHeadModel, synthetic weights) over
// batch and sequence length in each dtype: one op is a forward pass of the
// batch with the logits of every position (tok/s), through the model's
// nn.Runner; on devices that capture graphs, one launch of the captured
// pass. rel-err is the last position's logits on the golden input against
// the PyTorch reference: the benchmark's own output where its shape is the
// golden's, else a pass of the same model over the golden input.
func BenchmarkGPT2(b *testing.B) {
	ref, err := loadGPT2Reference()
	if err != nil {
		b.Fatal(err)
	}
	for _, dev := range devices {
		for _, dtype := range gpt2DTypes(dev) {
			var m *gpt2.Model
			for _, s := range gpt2Shapes(dev) {
				b.Run(fmt.Sprintf("dev=%s/dtype=%s/batch=%d/seq=%d", dev.Name(), dtype, s[0], s[1]), func(b *testing.B) {
					if m == nil {
						if m, err = loadGPT2(dev, dtype, ref.Seed); err != nil {
							b.Fatal(err)
						}
					}
					gpt2Bench(b, m, ref, dtype, s[0], s[1])
				})
			}
			if m != nil {
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// gpt2Bench measures m's forward pass over batch sequences of seq tokens.
func gpt2Bench(b *testing.B, m *gpt2.Model, ref *gpt2Reference, dtype string, batch, seq int) {
	dev := m.Backend()
	in := ref.inputs(batch, seq, m.Config.VocabSize)
	r, err := m.NewRunner(in)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if err := r.Set(in); err != nil {
		b.Fatal(err)
	}
	verify := func() (float64, error) {
		if batch == ref.batch && seq == ref.seq {
			return ref.relErr(r)
		}
		return gpt2Check(m, ref)
	}
	dt := m.Precision.DType()
	if m.Quantized() {
		dt = kernels.I8
	}
	w := m.ForwardWork(batch, seq)
	zbench.Measure(b, zbench.Bench{
		Dev: dev, Op: captured(b, dev, r.Run),
		Work:   zbench.Workload{FLOPs: w.FLOPs, Bytes: w.Bytes, DType: dt, Items: float64(batch * seq), ItemUnit: "tok/s"},
		Verify: verify, MaxRelErr: gpt2Tolerances[dtype],
	})
}

// gpt2Check runs the golden input through m and returns its rel-err.
func gpt2Check(m *gpt2.Model, ref *gpt2Reference) (rel float64, err error) {
	in := ref.inputs(ref.batch, ref.seq, m.Config.VocabSize)
	r, err := m.NewRunner(in)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	if err := r.Set(in); err != nil {
		return 0, err
	}
	if err := r.Run(); err != nil {
		return 0, err
	}
	return ref.relErr(r)
}
