package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/checkpoint"
	"github.com/zbench/zbench/models/imagenet"
	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/safetensors"
	"github.com/zbench/zbench/zbench"
)

// An inferJob is one run of a model, its flags checked.
type inferJob struct {
	dev   kernels.Backend
	model string            // the --model name
	dtype string            // one of the model's dtypes
	files checkpoint.Files  // the checkpoint's config and weights
	input *safetensors.File // the parsed --input file, nil with --image
	// image is the --image photograph to classify, labels the class
	// names of --labels (nil without), top the --top count.
	image  string
	labels []string
	top    int
}

// An inferResult is what a model's run produced.
type inferResult struct {
	outputs []safetensors.Tensor // F32, written to --output
	batch   string               // the shape of the batch, such as "3×11"
	load    time.Duration        // reading and uploading the weights and inputs
	forward time.Duration        // the forward pass, device synchronised
	report  []string             // lines printed after the summary (an image's top classes)
}

// knownDevices are the --device values, whether or not this binary and
// machine have them.
var knownDevices = []string{"cpu", "cuda"}

const inferSynopsis = "--model MODEL --weights DIR|W.safetensors [--config config.json] (--input IN.safetensors --output OUT.safetensors | --image PHOTO [--labels labels.txt] [--top 5] [--output OUT.safetensors]) [--device cpu|cuda] [--dtype f32|tf32|f16|bf16|mixed]"

const inferDoc = `
Infer loads a Hugging Face checkpoint (safetensors weights and config.json)
on a device, runs its forward pass on the inputs in IN and writes the outputs
to OUT, to compare with a dump of the same run from PyTorch.

--weights names the checkpoint as Hugging Face stores it: a directory
holding config.json and model.safetensors (or shards listed in
model.safetensors.index.json), or one safetensors file, whose config is
the config.json beside it. --config overrides that config.json.

OUT is written atomically: a failed run leaves no file.

What each model reads from IN and writes to OUT:`

// inferHelp is infer's documentation: inferDoc, then each registered
// model's paragraph (its inferDoc), once for models that share one.
func inferHelp() string {
	doc := inferDoc
	last := ""
	for _, m := range registry {
		if m.load != nil && m.inferDoc != last {
			doc += "\n\n" + m.inferDoc
			last = m.inferDoc
		}
	}
	return doc
}

func runInfer(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("infer", inferSynopsis, inferHelp(), stderr)
	var (
		model   = fs.String("model", "", "the model: "+strings.Join(modelNames(canInfer), ", ")+" (required)")
		weights = fs.String("weights", "", "the checkpoint, a `path`: a Hugging Face model directory (config.json, model.safetensors), one safetensors file, or a .gguf file (llama) (required)")
		config  = fs.String("config", "", "the model's Hugging Face config.json `file` (default: config.json in the checkpoint's directory)")
		input   = fs.String("input", "", "the inputs, a safetensors `file` (required)")
		output  = fs.String("output", "", "the safetensors `file` to write the outputs to (required)")
		device  = fs.String("device", "cpu", "the device: "+strings.Join(knownDevices, " or "))
		dtype   = fs.String("dtype", "f32", "the precision: f32, tf32 (ResNets), f16, bf16 or mixed (BERT: f32 weights with an f16 attention core)")
		image   = fs.String("image", "", "a JPEG or PNG photograph `file` to classify (ResNets), instead of --input")
		labels  = fs.String("labels", "", "with --image: the class names, a text `file` with one per line")
		top     = fs.Int("top", 5, "with --image: how many classes to print")
	)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	var missing []string
	type flagValue struct{ name, val string }
	required := []flagValue{{"model", *model}, {"weights", *weights}}
	if *image == "" {
		required = append(required, flagValue{"input", *input}, flagValue{"output", *output})
	}
	for _, f := range required {
		if f.val == "" {
			missing = append(missing, "--"+f.name)
		}
	}
	if len(missing) > 0 {
		return usageErrorf("missing required flag %s (see 'zbench infer -h')", strings.Join(missing, ", "))
	}
	m, err := modelFor(canInfer, *model)
	if err != nil {
		return err
	}
	if !slices.Contains(m.dtypes, *dtype) {
		return usageErrorf("unknown --dtype %q for %s (want %s)", *dtype, *model, strings.Join(m.dtypes, ", "))
	}
	switch {
	case *image != "" && !m.images:
		return usageErrorf("--image is for image classifiers; %s takes --input", *model)
	case *image != "" && *input != "":
		return usageErrorf("--image and --input both given: classify a photograph or run an input file, not both")
	case *image == "" && *labels != "":
		return usageErrorf("--labels needs --image")
	case *top < 1:
		return usageErrorf("--top %d: want at least 1", *top)
	case m.stateDict && *config != "":
		return usageErrorf("--config: %s reads its architecture from its name and its weights, it has no config.json", *model)
	}
	var files checkpoint.Files
	if isGGUF(*weights) {
		switch {
		case !m.generates:
			return usageErrorf("--weights %s: only Llama-family models (%s) read GGUF files", *weights, strings.Join(modelNames(canGenerate), ", "))
		case *config != "":
			return usageErrorf("--config: the GGUF file %s carries its own config", *weights)
		}
		if _, err := os.Stat(*weights); err != nil {
			return fmt.Errorf("weights: %w", err)
		}
		files = checkpoint.Files{Weights: []string{*weights}}
	} else if m.stateDict {
		files, err = checkpoint.ResolveWeights(*weights)
	} else {
		files, err = checkpoint.Resolve(*weights, *config)
	}
	if err != nil {
		return err
	}
	var names []string
	if *labels != "" {
		if names, err = imagenet.ReadLabels(*labels); err != nil {
			return err
		}
	}
	dev, err := openDevice(*device)
	if err != nil {
		return err
	}

	start := time.Now()
	var out *atomicFile
	if *output != "" {
		if out, err = createAtomic(*output); err != nil {
			return err
		}
		defer out.abort() // a no-op after commit
	}
	job := inferJob{dev: dev, model: *model, dtype: *dtype, files: files, image: *image, labels: names, top: *top}
	if *input != "" {
		if job.input, err = safetensors.Open(*input); err != nil {
			return fmt.Errorf("input: %w", err)
		}
	}
	res, err := inferRun(m, job)
	if err != nil {
		return err
	}
	for _, t := range res.outputs {
		if err := checkFinite(t); err != nil {
			return fmt.Errorf("%s on %s in %s: %w (no output written)", *model, dev.Name(), *dtype, err)
		}
	}
	meta := map[string]string{
		"format":      "zbench infer output",
		"model":       *model,
		"device":      dev.Name(),
		"device_name": dev.Info().Name,
		"dtype":       *dtype,
		"weights":     filepath.Base(files.Weights[0]),
	}
	if files.Config != "" {
		meta["config"] = filepath.Base(files.Config)
	}
	if *input != "" {
		meta["input"] = filepath.Base(*input)
	} else {
		meta["image"] = filepath.Base(*image)
	}
	written := "not written"
	if out != nil {
		if err := out.commit(res.outputs, meta); err != nil {
			return err
		}
		written = fmt.Sprintf("%s (%s)", *output, describe(res.outputs))
	}
	fmt.Fprintf(stdout, "model   %s\ndevice  %s (%s)\ndtype   %s\nbatch   %s\noutput  %s\nelapsed %v (load %v, forward %v)\n",
		*model, dev.Name(), dev.Info().Name, *dtype, res.batch, written,
		round(time.Since(start)), round(res.load), round(res.forward))
	for _, line := range res.report {
		fmt.Fprintln(stdout, line)
	}
	return nil
}

// inferRun runs the model m of job on its input file, or on its --image
// preprocessed as torchvision's ImageNet evaluation transform does (then
// with the image's top classes in the report): the model loaded, a runner
// for the inputs' shape, one forward pass, the outputs.
func inferRun(m modelEntry, job inferJob) (res inferResult, err error) {
	var in map[string]nn.Values
	if job.image != "" {
		img, err := imagenet.Load(job.image)
		if err != nil {
			return res, err
		}
		px, err := imagenet.Preprocess(img)
		if err != nil {
			return res, fmt.Errorf("image %s: %w", job.image, err)
		}
		in = map[string]nn.Values{"pixel_values": {Shape: []int{1, 3, imagenet.CropSize, imagenet.CropSize}, F32: px}}
	} else if in, err = m.read(job.input); err != nil {
		return res, err
	}
	inName := "input"
	if job.input != nil {
		inName = fmt.Sprintf("input file %q", job.input.Name())
	}
	start := time.Now()
	model, err := m.load(job)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, model.Close()) }()
	r, err := model.NewRunner(in)
	if err != nil {
		return res, fmt.Errorf("%s: %w", inName, err)
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	if err := r.Set(in); err != nil {
		return res, fmt.Errorf("%s: %w", inName, err)
	}
	if err := job.dev.Sync(); err != nil {
		return res, fmt.Errorf("%s: loading: %w", job.model, err)
	}
	res.load = time.Since(start)

	start = time.Now()
	if err := r.Run(); err != nil {
		return res, err
	}
	if err := job.dev.Sync(); err != nil {
		return res, fmt.Errorf("%s: forward: %w", job.model, err)
	}
	res.forward = time.Since(start)
	outs, err := r.Outputs()
	if err != nil {
		return res, err
	}
	for _, o := range outs {
		res.outputs = append(res.outputs, f32Tensor(o.Name, o.F32, o.Shape...))
	}
	first, ok := in["input_ids"]
	if !ok {
		first = in["pixel_values"]
	}
	res.batch = strings.Trim(strings.ReplaceAll(fmt.Sprint(first.Shape), " ", "×"), "[]")
	if job.image == "" {
		return res, nil
	}
	top, err := imagenet.TopK(outs[0].F32, job.top)
	if err != nil {
		return res, fmt.Errorf("%s on %s: %w", job.model, job.image, err)
	}
	for i, p := range top {
		name := fmt.Sprintf("class %d", p.Index)
		if job.labels != nil {
			name = fmt.Sprintf("%s (%d)", job.labels[p.Index], p.Index)
		}
		res.report = append(res.report, fmt.Sprintf("%d. %6.2f%%  %s", i+1, 100*p.Prob, name))
	}
	return res, nil
}

// openDevice returns the named device, or an error listing the devices
// available here.
func openDevice(name string) (kernels.Backend, error) {
	d, why := kernels.Open(name)
	if why == nil {
		return d, nil
	}
	devs, _ := zbench.Devices()
	var have []string
	for _, dev := range devs {
		have = append(have, dev.Name())
	}
	avail := strings.Join(have, ", ")
	if !slices.Contains(knownDevices, name) {
		return nil, usageErrorf("unknown --device %q (want %s; available here: %s)", name, strings.Join(knownDevices, " or "), avail)
	}
	// Say why: not built in, no GPU, or a driver failure.
	msg := fmt.Sprintf("--device %s is not available here (available: %s)", name, avail)
	if name == "cuda" {
		msg += "; it needs a binary built with -tags cuda and an NVIDIA GPU"
	}
	return nil, fmt.Errorf("%s: %w", msg, why)
}

// intTensor reads the named integer tensor of the input file f. A missing
// tensor gives ok false and no error.
func intTensor(f *safetensors.File, name string) (vals []int32, shape []int, ok bool, err error) {
	t, err := f.Tensor(name)
	if errors.Is(err, safetensors.ErrNotFound) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("input: %w", err)
	}
	switch t.DType {
	case "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL":
	default:
		return nil, nil, false, fmt.Errorf("input file %q: tensor %q has dtype %s, want an integer dtype (I64 or I32)", f.Name(), name, t.DType)
	}
	v, err := t.Int32()
	if err != nil {
		return nil, nil, false, fmt.Errorf("input file %q: %w", f.Name(), err)
	}
	return v, t.Shape, true, nil
}

// checkNames returns an error naming the first tensor of the input file f
// that is not in want.
func checkNames(f *safetensors.File, want []string) error {
	for _, n := range f.Tensors() {
		if !slices.Contains(want, n) {
			return fmt.Errorf("input file %q: unexpected tensor %q (want %s)", f.Name(), n, strings.Join(want, ", "))
		}
	}
	return nil
}

// f32Tensor makes an F32 safetensors tensor of vals.
func f32Tensor(name string, vals []float32, shape ...int) safetensors.Tensor {
	b := make([]byte, 4*len(vals))
	_ = kernels.EncodeFloat32(kernels.F32, b, vals) // F32 of a buffer of the right size cannot fail
	return safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: b}
}

// checkFinite returns an error naming the first NaN or infinity of the F32
// tensor t.
func checkFinite(t safetensors.Tensor) error {
	vals, err := t.Float32()
	if err != nil {
		return err
	}
	for i, v := range vals {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("output %s%v has %v at %v", t.Name, t.Shape, v, unravel(i, t.Shape))
		}
	}
	return nil
}

// unravel turns a row-major flat index into an index per dimension.
func unravel(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
	}
	return idx
}

// describe lists tensors' names and shapes for the summary.
func describe(ts []safetensors.Tensor) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s %v", t.Name, t.Shape)
	}
	return strings.Join(parts, ", ")
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// atomicFile writes a file atomically: into a temporary file in the same
// directory, renamed over the path once complete.
type atomicFile struct {
	path string
	tmp  *os.File
	done bool
}

// createAtomic starts writing path. It fails at once if path's directory
// cannot take a new file, before any work is done.
func createAtomic(path string) (*atomicFile, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("output %s: is a directory", path)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("output %s: cannot create a file in %s: %w", path, dir, err)
	}
	return &atomicFile{path: path, tmp: tmp}, nil
}

// commit writes the tensors and metadata and moves the file into place.
func (a *atomicFile) commit(ts []safetensors.Tensor, meta map[string]string) error {
	return a.commitWith(func(w io.Writer) error { return safetensors.Write(w, ts, meta) })
}

// commitBytes writes data and moves the file into place.
func (a *atomicFile) commitBytes(data []byte) error {
	return a.commitWith(func(w io.Writer) error { _, err := w.Write(data); return err })
}

// commitWith writes the file's contents with write and moves the file
// into place.
func (a *atomicFile) commitWith(write func(io.Writer) error) error {
	w := bufio.NewWriter(a.tmp)
	err := write(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = a.tmp.Sync()
	}
	if err == nil {
		err = a.tmp.Chmod(0o644) // CreateTemp's 0600 is for the half-written file
	}
	if cerr := a.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(a.tmp.Name(), a.path)
	}
	if err != nil {
		_ = os.Remove(a.tmp.Name())
		return fmt.Errorf("output %s: %w", a.path, err)
	}
	a.done = true
	return nil
}

// abort removes the temporary file unless commit succeeded.
func (a *atomicFile) abort() {
	if !a.done {
		_ = a.tmp.Close()
		_ = os.Remove(a.tmp.Name())
		a.done = true
	}
}
