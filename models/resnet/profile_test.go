package resnet

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/kernels/cpu"
)

func TestProfile(t *testing.T) {
	be := cpu.New()
	cfg, err := ByName("resnet50")
	require.NoError(t, err)
	cfg.NumClasses = 10
	m, err := Load(be, cfg, Synthetic(cfg, 5), Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	const n, h, w = 2, 40, 36
	f, err := m.NewForward(n, h, w)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	require.NoError(t, f.SetPixels(smallInput(n, h, w)))

	_, err = f.Profile(0)
	require.ErrorContains(t, err, "profile of 0 rounds")
	ops, err := f.Profile(3)
	require.NoError(t, err)
	var flops float64
	names := map[string]int{}
	for _, o := range ops {
		flops += o.FLOPs
		names[o.Name]++
		assert.Positive(t, o.Min, o.Name)
		assert.LessOrEqual(t, o.Min, o.Time, o.Name)
		assert.NotEmpty(t, o.Shape, o.Name)
	}
	assert.InDelta(t, cfg.FLOPs(n, h, w), flops, 1, "the ops' FLOPs add up to the pass's")
	for _, cv := range cfg.arch().convs() {
		assert.Equal(t, 1, names[cv.conv], cv.conv)
	}
	for _, op := range []string{"pixels", "maxpool", "avgpool", "fc"} {
		assert.Equal(t, 1, names[op], op)
	}
	assert.Equal(t, "conv1", ops[1].Name)
	assert.Equal(t, "7x7/2 3→64 40x36", ops[1].Shape)

	// The profiled pass computes what Run does.
	want := logitsOf(t, m, smallInput(n, h, w), n, h, w)
	got, err := f.Logits()
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// BenchmarkProfile times each op of ResNet-50's f32 pass on the CPU (224×224,
// seeded synthetic weights): one op is a pass, and -v logs every layer's
// median and least time and GFLOP/s (at the median), then the totals by
// kind. sum-ms adds the ops' medians, min-sum-ms their least times (on a
// shared machine, the pass with the least interference).
func BenchmarkProfile(b *testing.B) {
	cfg, err := ByName("resnet50")
	require.NoError(b, err)
	m, err := Load(cpu.New(), cfg, Synthetic(cfg, 1), Options{})
	require.NoError(b, err)
	defer func() { require.NoError(b, m.Close()) }()
	for _, batch := range []int{1, 8} {
		b.Run(fmt.Sprintf("dev=cpu/model=%s/dtype=f32/batch=%d", cfg.Name, batch), func(b *testing.B) {
			f, err := m.NewForward(batch, 224, 224)
			require.NoError(b, err)
			defer func() { require.NoError(b, f.Close()) }()
			require.NoError(b, f.SetPixels(smallInput(batch, 224, 224)))
			require.NoError(b, f.Run())
			b.ResetTimer()
			ops, err := f.Profile(b.N)
			require.NoError(b, err)
			b.StopTimer()
			var sum, least time.Duration
			for _, o := range ops {
				sum += o.Time
				least += o.Min
			}
			b.ReportMetric(cfg.FLOPs(batch, 224, 224)/sum.Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(float64(sum.Microseconds())/1e3, "sum-ms")
			b.ReportMetric(float64(least.Microseconds())/1e3, "min-sum-ms")
			var sb strings.Builder
			writeProfile(&sb, ops)
			b.Log("\n" + sb.String())
		})
	}
}

// writeProfile writes ops as a table, then their times summed by kind:
// convolutions by window (the stem apart), and every other op by name.
func writeProfile(w io.Writer, ops []OpTime) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tshape\tms\tmin ms\tGFLOP/s\t")
	var total, least time.Duration
	kinds := map[string]*OpTime{}
	var order []string
	for _, o := range ops {
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%.0f\t\n", o.Name, o.Shape, o.Time.Seconds()*1e3, o.Min.Seconds()*1e3, o.GFLOPS())
		total += o.Time
		kind := o.Name
		switch {
		case o.Name == "conv1":
			kind = "stem conv 7x7/2"
		case strings.Contains(o.Name, "conv") || strings.Contains(o.Name, "downsample"):
			kind, _, _ = strings.Cut(o.Shape, " ")
			kind = "conv " + kind
		}
		k := kinds[kind]
		if k == nil {
			k = &OpTime{Name: kind}
			kinds[kind] = k
			order = append(order, kind)
		}
		k.FLOPs += o.FLOPs
		k.Time += o.Time
		k.Min += o.Min
	}
	fmt.Fprintln(tw, "\t\t\t\t\t")
	fmt.Fprintln(tw, "kind\tshare\tms\tmin ms\tmin GFLOP/s\t")
	for _, kind := range order {
		k := kinds[kind]
		fmt.Fprintf(tw, "%s\t%.1f%%\t%.3f\t%.3f\t%.0f\t\n", kind, 100*k.Time.Seconds()/total.Seconds(), k.Time.Seconds()*1e3,
			k.Min.Seconds()*1e3, k.FLOPs/k.Min.Seconds()/1e9)
		least += k.Min
	}
	fmt.Fprintf(tw, "total\t100%%\t%.3f\t%.3f\t\t\n", total.Seconds()*1e3, least.Seconds()*1e3)
	tw.Flush()
}
