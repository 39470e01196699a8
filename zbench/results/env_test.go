package results

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDiffConfig(t *testing.T) {
	file := func(text string) *File { return file1(t, text+"\nBenchmarkX-2 1 10 ns/op\n") }
	base := file("cpu: Intel(R) Xeon(R) Processor\ngomaxprocs: 2\nblas: gonum\ngo: go1.26.8\nzbench-commit: aaa\ncpu-bandwidth-gbps: 15.0")
	for _, tc := range []struct {
		name  string
		other string
		want  []Setting
	}{
		{"only run keys differ", "cpu: Intel(R) Xeon(R) Processor\ngomaxprocs: 2\nblas: gonum\ngo: go1.26.8\nzbench-commit: bbb\ncpu-bandwidth-gbps: 22.2", nil},
		{"keys one side lacks are not differences", "cpu: Intel(R) Xeon(R) Processor\nimpl: torch-1.13.0a0\nblas: gonum", nil},
		{"software", "cpu: Intel(R) Xeon(R) Processor\ngomaxprocs: 2\nblas: openblas\ngo: go1.27", []Setting{
			{Key: "blas", Base: "gonum", Other: "openblas"}, {Key: "go", Base: "go1.26.8", Other: "go1.27"}}},
		{"the OS's model name over Go's CPUID brand", "cpu: Oxide Virtual Turin-like Processor\ncpu-model: Intel(R) Xeon(R) Processor\nblas: gonum", nil},
		{"a virtual machine's brand string does not hide another model", "cpu: Intel(R) Xeon(R) Processor\ncpu-model: AMD EPYC", []Setting{
			{Key: "cpu", Base: "Intel(R) Xeon(R) Processor", Other: "AMD EPYC", Hardware: true}}},
		{"hardware first", "cpu: AMD EPYC\ngomaxprocs: 4\nblas: openblas", []Setting{
			{Key: "cpu", Base: "Intel(R) Xeon(R) Processor", Other: "AMD EPYC", Hardware: true},
			{Key: "gomaxprocs", Base: "2", Other: "4", Hardware: true},
			{Key: "blas", Base: "gonum", Other: "openblas"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DiffConfig(base, file(tc.other))
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.want != nil && tc.want[0].Hardware, CrossHardware(got))
		})
	}
}

// TestDiffConfigCPUModel: where both files have cpu-model: lines, Go's
// cpu: line is compared too, so that two runs of go test -bench on
// different processors are flagged even where the OS names them alike.
func TestDiffConfigCPUModel(t *testing.T) {
	file := func(text string) *File { return file1(t, text+"\nBenchmarkX-2 1 10 ns/op\n") }
	base := file("cpu: Intel(R) Xeon(R) Platinum 8488C\ncpu-model: Intel(R) Xeon(R) Processor")
	for _, tc := range []struct {
		name  string
		other string
		want  []Setting
	}{
		{"the same processor", "cpu: Intel(R) Xeon(R) Platinum 8488C\ncpu-model: Intel(R) Xeon(R) Processor", nil},
		{"another CPUID brand, the same model name", "cpu: Intel(R) Xeon(R) Platinum 8581C\ncpu-model: Intel(R) Xeon(R) Processor", []Setting{
			{Key: "cpu", Base: "Intel(R) Xeon(R) Platinum 8488C", Other: "Intel(R) Xeon(R) Platinum 8581C", Hardware: true}}},
		{"another model name, the same CPUID brand", "cpu: Intel(R) Xeon(R) Platinum 8488C\ncpu-model: AMD EPYC", []Setting{
			{Key: "cpu-model", Base: "Intel(R) Xeon(R) Processor", Other: "AMD EPYC", Hardware: true}}},
		{"a peer's cpu: line is the model name", "cpu: Intel(R) Xeon(R) Processor\nimpl: torch-1.13.0a0", nil},
		{"a peer on another processor", "cpu: AMD EPYC\nimpl: torch-1.13.0a0", []Setting{
			{Key: "cpu", Base: "Intel(R) Xeon(R) Processor", Other: "AMD EPYC", Hardware: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, DiffConfig(base, file(tc.other)))
			assert.Equal(t, tc.want != nil, CrossHardware(DiffConfig(file(tc.other), base)), "either way round")
		})
	}
}

func TestConfigAppendedRuns(t *testing.T) {
	f := file1(t, "cpu: A\nBenchmarkX 1 1 ns/op\ncpu: B\nBenchmarkY 1 1 ns/op\ncpu: A\nBenchmarkZ 1 1 ns/op\n")
	assert.Equal(t, []string{"A", "B"}, f.Config()["cpu"])
	g := file1(t, "cpu: B\nBenchmarkX 1 1 ns/op\ncpu: A\nBenchmarkY 1 1 ns/op\n")
	assert.Empty(t, DiffConfig(f, g), "the same set of values in another order")
	assert.Equal(t, []Setting{{Key: "cpu", Base: "A", Other: "A | B", Hardware: true}},
		DiffConfig(file1(t, "cpu: A\nBenchmarkX 1 1 ns/op\n"), f))
}

// file1 parses text as a results file.
func file1(t *testing.T, text string) *File {
	t.Helper()
	f, err := Parse(strings.NewReader(text), "f")
	require.NoError(t, err)
	return f
}
