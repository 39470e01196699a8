package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/gguf"
	"github.com/zbench/zbench/models/llama"
	"github.com/zbench/zbench/models/tokenizer"
)

// isGGUF reports whether path names a GGUF file, by its extension.
func isGGUF(path string) bool { return strings.EqualFold(filepath.Ext(path), ".gguf") }

// loadLlamaGGUF loads the Llama model of a GGUF file on dev in dtype
// (auto: the file's float type, f32 for quantized files), with quantized
// set the decoder layers' Q4_0 weights repacked exactly for the
// weight-only int4 kernels and everything else dequantized to dtype, and
// its embedded tokenizer (nil, with tokErr saying why, when it has none that
// models/tokenizer reads).
func loadLlamaGGUF(dev kernels.Backend, path, dtype string, quantized bool) (m *llama.Model, tok *tokenizer.Tokenizer, tokErr error, err error) {
	l, err := gguf.OpenLlama(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	prec, err := llamaPrecision(dtype, l.Config)
	if err != nil {
		return nil, nil, nil, err
	}
	tok, tokErr = l.File.Tokenizer()
	if quantized {
		// Q4_0 weights run as they are on the weight-only int4 kernels,
		// where the device has them.
		m, err = gguf.LoadLlama(dev, l.Config, l, prec)
	} else {
		m, err = llama.Load(dev, l.Config, l, prec)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("loading %s: %w", path, err)
	}
	return m, tok, tokErr, nil
}

// ggufQuantizeFlags are the quantize flags --format gguf reads besides
// --model, --weights, --config and --out.
var ggufQuantizeFlags = []string{"format", "type", "tokenizer", "name", "device"}

// quantizeGGUF is quantize --format gguf: it writes the Llama model of
// --weights (a checkpoint, a GGUF file or synthetic[:SEED]) as one GGUF
// file of type typ with its tokenizer embedded.
func quantizeGGUF(fs *flag.FlagSet, stdout io.Writer, weights, config, typ, tokPath, name, out string) error {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		if !strings.Contains(" model weights config out "+strings.Join(ggufQuantizeFlags, " ")+" ", " "+f.Name+" ") {
			set = append(set, "--"+f.Name)
		}
	})
	if len(set) > 0 {
		return usageErrorf("%s: not used by --format gguf", strings.Join(set, ", "))
	}
	t, err := gguf.ParseType(strings.ToUpper(typ))
	if err != nil {
		return usageErrorf("--type: %v", err)
	}
	cfg, src, files, closeSrc, err := llamaQuantizeSource(weights, config)
	if err != nil {
		return err
	}
	defer func() { _ = closeSrc() }()
	var tok *tokenizer.Tokenizer
	switch {
	case tokPath != "":
		tok, err = tokenizer.Load(tokPath)
	case isGGUF(weights):
		tok, err = src.(*gguf.Llama).File.Tokenizer()
	case len(files.Weights) > 0:
		tok, err = tokenizer.Load(filepath.Dir(files.Weights[0]))
	default:
		return usageErrorf("--weights %s has no tokenizer: give --tokenizer (a GGUF file embeds one)", weights)
	}
	if err != nil {
		return err
	}
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(weights), filepath.Ext(weights))
	}
	f, err := createAtomic(out)
	if err != nil {
		return err
	}
	defer f.abort() // a no-op after commit
	if err := f.commitWith(func(w io.Writer) error { return gguf.WriteLlama(w, name, cfg, src, tok, t) }); err != nil {
		return err
	}
	info, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %d parameters, %d tokens, %.1f MiB\n", out, t, cfg.CountParams(), cfg.VocabSize, float64(info.Size())/(1<<20))
	return nil
}
