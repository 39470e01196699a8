// Package results reads files of Go benchmark output (what go test -bench
// prints, and what zbench's PyTorch peers print) into one sample of values
// per benchmark and unit, for comparing and reporting.
//
// Parsing is golang.org/x/perf/benchfmt's: config lines, Unit metadata
// lines and benchmark lines, with units tidied as benchstat tidies them
// (ns/op becomes sec/op, MB/s becomes B/s).
package results

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// ErrNoResults is wrapped by the error for a file that holds no benchmark
// results: an empty file, or one that is not benchmark output.
var ErrNoResults = errors.New("no benchmark results")

// A Key is one part of a benchmark's name after the workload: "dev=cpu"
// is {Name: "dev", Value: "cpu"}; a part without "=" has an empty Name.
type Key struct {
	Name, Value string
}

// A Benchmark is every result of one benchmark in one file.
type Benchmark struct {
	// Name is the benchmark's name without the "Benchmark" prefix and
	// without the -GOMAXPROCS suffix: "MatMul/dev=cpu/dtype=f32/m=256".
	Name string
	// Procs is the -GOMAXPROCS suffix of the name, 0 when there is none.
	Procs int
	// Workload is the first element of Name: "MatMul".
	Workload string
	// Keys are the other elements of Name, in order.
	Keys []Key
	// Config is the file configuration ("key: value" lines) in effect
	// at the benchmark's first result.
	Config map[string]string
	// Values holds the values of each tidied unit ("sec/op", "GFLOP/s",
	// "rel-err"), in the order they were read.
	Values map[string][]float64
	// Units lists the units of Values in the order they first appear.
	Units []string
	// Pos is "file:line" of the benchmark's first result.
	Pos string
}

// ID identifies the benchmark across files: its name and, when present,
// the -GOMAXPROCS suffix, as benchstat matches benchmarks.
func (b *Benchmark) ID() string {
	if b.Procs == 0 {
		return b.Name
	}
	return b.Name + "-" + strconv.Itoa(b.Procs)
}

// String is the part as the name writes it: "dev=cpu", or the value alone
// for a part without "=".
func (k Key) String() string {
	if k.Name == "" {
		return k.Value
	}
	return k.Name + "=" + k.Value
}

// Get returns the value of the name key k ("dev", "dtype", "batch"), or ""
// when the name has no such key.
func (b *Benchmark) Get(k string) string {
	for _, kv := range b.Keys {
		if kv.Name == k {
			return kv.Value
		}
	}
	return ""
}

// Rest is the name without the workload and the keys in omit, joined by
// "/": the part that tells benchmarks of one workload, device and dtype
// apart.
func (b *Benchmark) Rest(omit ...string) string {
	var parts []string
	for _, kv := range b.Keys {
		if kv.Name == "" || !slices.Contains(omit, kv.Name) {
			parts = append(parts, kv.String())
		}
	}
	return strings.Join(parts, "/")
}

// A File is the benchmarks of one file of benchmark output.
type File struct {
	// Path is the file's name as given to Read.
	Path string
	// Benchmarks are in the order of their first result.
	Benchmarks []*Benchmark
	// Units is the file's Unit metadata (better=, assume=).
	Units benchfmt.UnitMetadataMap
	// Skipped lists the lines that looked like benchmark results but
	// could not be parsed, as "file:line: message".
	Skipped []string

	byID map[string]*Benchmark
}

// Lookup returns the benchmark with the given ID, or nil.
func (f *File) Lookup(id string) *Benchmark { return f.byID[id] }

// Better returns +1 when higher values of unit are better, −1 when lower
// ones are: from the file's Unit lines, else benchfmt's defaults (time,
// bytes and allocations per op are better lower), else by the form of the
// unit (x/op lower, x/s higher). It returns 0 when it cannot tell.
func (f *File) Better(unit string) int {
	if b := f.Units.GetBetter(unit); b != 0 {
		return b
	}
	switch {
	case strings.HasSuffix(unit, "/op"):
		return -1
	case strings.HasSuffix(unit, "/s"):
		return 1
	}
	return 0
}

// Read reads the benchmark output file at path.
func Read(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: empty file: %w", path, ErrNoResults)
	}
	return Parse(bytes.NewReader(data), path)
}

// Parse reads benchmark output from r; name is the file name used in
// errors and positions. Lines that are not config, Unit or benchmark lines
// (test logs, PASS, ok) are ignored; a file without a single benchmark
// result is an error wrapping ErrNoResults.
func Parse(r io.Reader, name string) (*File, error) {
	f := &File{Path: name, byID: map[string]*Benchmark{}}
	rd := benchfmt.NewReader(r, name)
	lines := 0
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			f.Skipped = append(f.Skipped, rec.Error())
		case *benchfmt.Result:
			lines++
			f.add(rec)
		}
	}
	if err := rd.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f.Units = rd.Units()
	if lines == 0 {
		if len(f.Skipped) > 0 {
			return nil, fmt.Errorf("%s: %w, and %d malformed benchmark lines (first: %s)", name, ErrNoResults, len(f.Skipped), f.Skipped[0])
		}
		return nil, fmt.Errorf("%s: %w (not the output of go test -bench)", name, ErrNoResults)
	}
	return f, nil
}

// add files one result under its benchmark.
func (f *File) add(r *benchfmt.Result) {
	full := strings.TrimPrefix(string(r.Name.Full()), "Benchmark")
	name, procs := full, 0
	if i := strings.LastIndexByte(full, '-'); i > 0 {
		// Only a suffix that ID writes back as it is ("-02" and "-+2"
		// are not), so that the ID of every benchmark finds it.
		if n, err := strconv.Atoi(full[i+1:]); err == nil && n > 0 && strconv.Itoa(n) == full[i+1:] {
			name, procs = full[:i], n
		}
	}
	id := full
	b := f.byID[id]
	if b == nil {
		b = &Benchmark{Name: name, Procs: procs, Values: map[string][]float64{}, Config: map[string]string{}}
		parts := strings.Split(name, "/")
		b.Workload = parts[0]
		for _, p := range parts[1:] {
			k, v, ok := strings.Cut(p, "=")
			if !ok {
				k, v = "", p
			}
			b.Keys = append(b.Keys, Key{k, v})
		}
		for _, c := range r.Config {
			if c.File {
				b.Config[c.Key] = string(c.Value)
			}
		}
		file, line := r.Pos()
		b.Pos = fmt.Sprintf("%s:%d", file, line)
		f.byID[id] = b
		f.Benchmarks = append(f.Benchmarks, b)
	}
	for _, v := range r.Values {
		if _, ok := b.Values[v.Unit]; !ok {
			b.Units = append(b.Units, v.Unit)
		}
		b.Values[v.Unit] = append(b.Values[v.Unit], v.Value)
	}
}
