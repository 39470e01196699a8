package report

import (
	"fmt"
	"html"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/zbench/results"
	"github.com/zbench/zbench/zbench/trainlog"
)

// trainLog parses a training log of the given steps and losses, written
// as the BERT training test writes it.
func trainLog(t *testing.T, path string, steps []int, loss func(i int) float64) *trainlog.Log {
	t.Helper()
	var text strings.Builder
	for i, s := range steps {
		fmt.Fprintf(&text, `{"step":%d,"loss":%v}`+"\n", s, loss(i))
	}
	l, err := trainlog.Parse(strings.NewReader(text.String()), path)
	require.NoError(t, err)
	return l
}

// count returns 0, 1, …, n−1.
func count(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// bf16 runs 20 steps from loss 10 down by 0.25 a step: last 5.25, mean of
// the last 10 (steps 10…19) 6.375. fp8 runs 0.027 higher: mean 6.402,
// 0.42% above bf16's.
func bf16(t *testing.T) *trainlog.Log {
	return trainLog(t, "runs/bert-train-curve/bf16.jsonl", count(20), func(i int) float64 { return 10 - 0.25*float64(i) })
}

func fp8(t *testing.T) *trainlog.Log {
	return trainLog(t, "runs/bert-train-curve/fp8.jsonl", count(20), func(i int) float64 { return 10.027 - 0.25*float64(i) })
}

// short logs every tenth of 5 steps, losses 6, 5.5, …, 4: mean 5, 21.6%
// below bf16's.
func short(t *testing.T) *trainlog.Log {
	return trainLog(t, "runs/bert-train-curve/f32-short.jsonl", []int{0, 10, 20, 30, 40}, func(i int) float64 { return 6 - 0.5*float64(i) })
}

func TestWriteTraining(t *testing.T) {
	bf16Row := []string{"bert-train-curve/bf16", "20", "19", "10.00", "5.250", "6.375"}
	fp8Row := []string{"bert-train-curve/fp8", "20", "19", "10.03", "5.277", "6.402"}
	for _, tc := range []struct {
		name  string
		logs  func(t *testing.T) []*trainlog.Log
		head  []string
		rows  [][]string
		notMD []string
	}{
		{
			name: "two logs",
			logs: func(t *testing.T) []*trainlog.Log { return []*trainlog.Log{bf16(t), fp8(t)} },
			head: []string{"Log", "Steps", "Last step", "First loss", "Last loss", "Mean of last 10", "vs bert-train-curve/bf16", "Path"},
			rows: [][]string{
				append(bf16Row, "reference", "runs/bert-train-curve/bf16.jsonl"),
				append(fp8Row, "+0.4%", "runs/bert-train-curve/fp8.jsonl"),
			},
		},
		{
			name: "fp8 first",
			logs: func(t *testing.T) []*trainlog.Log { return []*trainlog.Log{fp8(t), bf16(t)} },
			head: []string{"Log", "Steps", "Last step", "First loss", "Last loss", "Mean of last 10", "vs bert-train-curve/fp8", "Path"},
			rows: [][]string{
				append(fp8Row, "reference", "runs/bert-train-curve/fp8.jsonl"),
				append(bf16Row, "-0.4%", "runs/bert-train-curve/bf16.jsonl"),
			},
		},
		{
			name: "a shorter log",
			logs: func(t *testing.T) []*trainlog.Log { return []*trainlog.Log{bf16(t), fp8(t), short(t)} },
			head: []string{"Log", "Steps", "Last step", "First loss", "Last loss", "Mean of last 10", "vs bert-train-curve/bf16", "Path"},
			rows: [][]string{
				append(bf16Row, "reference", "runs/bert-train-curve/bf16.jsonl"),
				append(fp8Row, "+0.4%", "runs/bert-train-curve/fp8.jsonl"),
				{"bert-train-curve/f32-short", "5", "40", "6.000", "4.000", "5.000 (of 5)", "-21.6%", "runs/bert-train-curve/f32-short.jsonl"},
			},
		},
		{
			name:  "one log",
			logs:  func(t *testing.T) []*trainlog.Log { return []*trainlog.Log{fp8(t)} },
			head:  []string{"Log", "Steps", "Last step", "First loss", "Last loss", "Mean of last 10", "Path"},
			rows:  [][]string{append(fp8Row, "runs/bert-train-curve/fp8.jsonl")},
			notMD: []string{"reference", "relative to"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			logs := tc.logs(t)
			paths, err := Write(dir, nil, logs, Options{Title: "BERT training"})
			require.NoError(t, err)
			want := []string{HTMLFile, MarkdownFile, "loss-step.svg", "loss-step.png"}
			for i := range want {
				want[i] = filepath.Join(dir, want[i])
			}
			assert.Equal(t, want, paths)
			for _, p := range paths {
				assert.FileExists(t, p)
			}

			md := readFile(t, filepath.Join(dir, MarkdownFile))
			assert.True(t, strings.HasPrefix(md, "# BERT training\n"))
			assert.Contains(t, md, fmt.Sprintf("Training loss of %d log", len(logs)))
			assert.Contains(t, md, "\n## Training loss\n")
			assert.Contains(t, md, "![Training loss against step](loss-step.png)")
			// Only the training section: no benchmark sections.
			assert.Equal(t, 1, strings.Count(md, "\n## "), "one section")
			for _, s := range tc.notMD {
				assert.NotContains(t, md, s)
			}
			assert.Equal(t, tc.head, mdRows(md)[0])
			assert.Equal(t, tc.rows, mdRows(md)[1:])

			page := readFile(t, filepath.Join(dir, HTMLFile))
			assert.Contains(t, page, "<title>BERT training</title>")
			assert.Equal(t, 1, strings.Count(page, "<svg "), "the loss plot inline")
			assertSelfContained(t, page)
			assert.Equal(t, tc.rows, htmlRows(page))

			// The plot's legend names every log.
			svg := readFile(t, filepath.Join(dir, "loss-step.svg"))
			for _, r := range tc.rows {
				assert.Contains(t, svg, ">"+r[0]+"<")
			}
		})
	}
}

// mdRows returns the cells of the rows of the markdown's pipe tables,
// without the separator rows.
func mdRows(md string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

// htmlRows returns the text of the cells of the body rows of the page's
// tables.
func htmlRows(page string) [][]string {
	var rows [][]string
	for _, tr := range regexp.MustCompile(`(?s)<tr>(.*?)</tr>`).FindAllStringSubmatch(page, -1) {
		var cells []string
		for _, td := range regexp.MustCompile(`<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(tr[1], -1) {
			cells = append(cells, html.UnescapeString(td[1]))
		}
		if cells != nil {
			rows = append(rows, cells)
		}
	}
	return rows
}

// A report of benchmark files and logs has both, the training section
// before the table of every result.
func TestWriteBenchmarksAndTraining(t *testing.T) {
	dir := t.TempDir()
	paths, err := Write(dir, []*results.File{ours(t, "m1/zbench.txt"), peer(t, "m1/torch.txt")}, []*trainlog.Log{bf16(t), fp8(t)}, Options{})
	require.NoError(t, err)
	for _, name := range []string{"throughput-batch-bert", "speedup-zbench-vs-torch-bert", "loss-step"} {
		assert.Contains(t, paths, filepath.Join(dir, name+".svg"))
		assert.Contains(t, paths, filepath.Join(dir, name+".png"))
	}
	md := readFile(t, filepath.Join(dir, MarkdownFile))
	assert.Contains(t, md, "Benchmark results of 2 files.")
	assert.Contains(t, md, "Training loss of 2 logs")
	var sections []string
	for _, line := range strings.Split(md, "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			sections = append(sections, h)
		}
	}
	assert.Equal(t, []string{
		"Sources", "Throughput against batch size", "Latency against batch size",
		"Latency against sequence length", "Matrix multiply throughput against size",
		"Speed-up against peers", "Training loss", "Results",
	}, sections)
	assert.Contains(t, md, "| bert-train-curve/fp8 | 20 | 19 | 10.03 | 5.277 | 6.402 | +0.4% |")
	assert.Contains(t, md, "| m1/zbench | ours | zbench | gonum | abc123 | 7 |", "the benchmark tables are as without logs")
	page := readFile(t, filepath.Join(dir, HTMLFile))
	assert.Equal(t, (len(paths)-2)/2, strings.Count(page, "<svg "), "every plot inline")
	assert.Contains(t, page, `<a href="#training-loss">Training loss</a>`)
}

// Logs with one step, the same label, negative or zero losses, or many
// steps still give a plot and a table.
func TestWriteTrainingOddLogs(t *testing.T) {
	spiky := trainLog(t, "b/long.jsonl", count(5000), func(i int) float64 {
		if i == 2500 {
			return 50
		}
		return 2 + math.Sin(float64(i))
	})
	for _, tc := range []struct {
		name   string
		logs   []*trainlog.Log
		wantMD []string
	}{
		{"one step", []*trainlog.Log{trainLog(t, "a/one.jsonl", []int{7}, func(int) float64 { return 3 })},
			[]string{"| a/one | 1 | 7 | 3.000 | 3.000 | 3.000 (of 1) | a/one.jsonl |"}},
		{"same label", []*trainlog.Log{bf16(t), bf16(t)},
			[]string{"| bert-train-curve/bf16 (2) | 20 | 19 | 10.00 | 5.250 | 6.375 | +0.00% |"}},
		{"zero reference", []*trainlog.Log{
			trainLog(t, "a/zero.jsonl", count(3), func(int) float64 { return 0 }),
			trainLog(t, "a/neg.jsonl", count(3), func(i int) float64 { return -float64(i) })},
			[]string{"| a/zero | 3 | 2 | 0 | 0 | 0 (of 3) | reference |", "| a/neg | 3 | 2 | 0 | -2.000 | -1.000 (of 3) | — |"}},
		{"long and spiky", []*trainlog.Log{spiky},
			[]string{"Logs of more than 2000 steps are drawn with the lowest and highest loss", "| b/long | 5000 | 4999 |"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			paths, err := Write(dir, nil, tc.logs, Options{})
			require.NoError(t, err)
			assert.Len(t, paths, 4)
			md := readFile(t, filepath.Join(dir, MarkdownFile))
			for _, s := range tc.wantMD {
				assert.Contains(t, md, s)
			}
		})
	}
}

func TestCurve(t *testing.T) {
	pts := make([]trainlog.Point, 5001)
	for i := range pts {
		pts[i] = trainlog.Point{Step: 10 * i, Loss: 2 + math.Sin(float64(i))}
	}
	pts[2500].Loss, pts[4000].Loss = 50, -3

	xys, thinned := curve(pts[:100], 100)
	assert.False(t, thinned)
	require.Len(t, xys, 100)
	assert.Equal(t, 990.0, xys[99].X)

	xys, thinned = curve(pts, 200)
	assert.True(t, thinned)
	assert.LessOrEqual(t, len(xys), 200)
	var ys []float64
	for i, p := range xys {
		ys = append(ys, p.Y)
		if i > 0 {
			assert.Greater(t, p.X, xys[i-1].X, "in step order")
		}
	}
	assert.Contains(t, ys, 50.0, "the spike is kept")
	assert.Contains(t, ys, -3.0, "the dip is kept")
}

func TestFormatPercent(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0.004, "+0.4%"},
		{-0.0042, "-0.4%"},
		{0.12345, "+12.3%"},
		{0.0004, "+0.04%"},
		{0, "+0.00%"},
		{math.Copysign(0, -1), "+0.00%"},
		{relative(6.402, 6.375), "+0.4%"},
		{relative(-1, -2), "+50.0%"},
		{relative(1, 0), "—"},
		{math.Inf(1), "—"},
	} {
		assert.Equal(t, tc.want, formatPercent(tc.v), "%v", tc.v)
	}
}

func TestNiceBounds(t *testing.T) {
	for _, tc := range []struct {
		lo, hi, wantLo, wantHi float64
	}{
		{0, 19, 0, 20},
		{1, 50, 0, 50},
		{5.25, 10.027, 5, 11},
		{3, 3, 2.7, 3.3},
		{0, 0, -1, 1},
		{-2, 0, -2, 0},
	} {
		lo, hi := niceBounds(tc.lo, tc.hi)
		assert.InDelta(t, tc.wantLo, lo, 1e-12, "[%v, %v]", tc.lo, tc.hi)
		assert.InDelta(t, tc.wantHi, hi, 1e-12, "[%v, %v]", tc.lo, tc.hi)
	}
}
