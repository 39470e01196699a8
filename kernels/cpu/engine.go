package cpu

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	xcpu "golang.org/x/sys/cpu"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/zbench/zbench/kernels/cpu/internal/sgemmasm"
)

// EngineEnv is the environment variable that chooses the CPU backend's
// engine, the implementation behind its matrix products: "purego" (gonum's
// Go BLAS with our own blocked, vectorised SGEMM, sgemm.go, and nothing
// loaded), "openblas" (OpenBLAS's SGEMM, loaded at run time), "onednn"
// (oneDNN, loaded at run time: its SGEMM, and its bfloat16 GEMM for
// bfloat16 products), or unset (or "auto") for the fastest that this
// machine has (chooseEngine). It is read when the first backend opens; a
// choice that cannot be loaded, or an unknown name, is an error of that
// open (and of every later one), never a fallback.
const EngineEnv = "ZBENCH_CPU_ENGINE"

// Engines are the engines EngineEnv names.
var Engines = []string{"purego", "openblas", "onednn"}

// ErrEngine marks an engine that cannot be used.
var ErrEngine = errors.New("CPU engine unavailable")

// engineChoice is the process's engine: blas32's implementation is
// global, so every Backend of a process shares it.
type engineChoice struct {
	name   string       // one of Engines, or "auto"
	blas   string       // the GEMMs, as DeviceInfo.BLAS names them: goBLASName (+"+"+ownBF16Name), "openblas", "onednn" or goBLASName+"+onednn-bf16"
	detail string       // the loaded library's own description
	impl   blas.Float32 // what blas32 is to use
	bf16   bf16Gemmer   // the bfloat16 GEMM, or nil to widen to float32
	err    error
}

// engine returns the process's engine, resolving EngineEnv, loading its
// library and installing it as blas32's implementation on the first call.
// New calls it, so that nothing is loaded until a backend opens: a process
// that imports the package and opens no backend (zbench compare) loads no
// library.
var engine = sync.OnceValue(func() engineChoice {
	c := chooseEngine(os.Getenv(EngineEnv), engineLibs{openblas: openBLASNames, onednn: oneDNNNames},
		sgemmasm.Available512, xcpu.X86.HasAMXBF16)
	if c.impl != nil {
		blas32.Use(c.impl)
	}
	return c
})

// engineLibs are the shared objects each loaded engine tries, in order.
type engineLibs struct{ openblas, onednn []string }

// openBLASNames are Debian's libopenblas0 (pthread or openmp flavour,
// through the alternatives system), then an unversioned development link.
var openBLASNames = []string{"libopenblas.so.0", "libopenblas.so"}

// oneDNNNames are Debian's libdnnl2 (oneDNN 2.x, which PyTorch's CPU path
// uses too), then an unversioned development link.
var oneDNNNames = []string{"libdnnl.so.2", "libdnnl.so"}

// chooseEngine resolves a value of EngineEnv, loading a library from libs
// when it is wanted; ownFirst says that our SGEMM is the fastest float32
// GEMM on this machine, and amx that the processor multiplies bfloat16
// in AMX tiles.
//
// Unset, it takes the fastest float32 GEMM and the fastest bfloat16 GEMM
// this machine has, as measured on this repository's AVX-512 machine: our
// SGEMM where its AVX-512 kernel runs (ahead of oneDNN's on BERT, ResNet
// and LoRA, whose products are small or multiply by transposed weights,
// and of OpenBLAS 0.3.21's, whose newest kernels are AVX2), else oneDNN's,
// else OpenBLAS's, else ours; and for bfloat16, oneDNN's where the
// processor has AMX (eight times AVX-512 BF16's multiply-adds a cycle), else
// ours where it has AVX-512 BF16 (ahead of oneDNN's on BERT's products),
// else oneDNN's where it is installed.
func chooseEngine(want string, libs engineLibs, ownFirst, amx bool) engineChoice {
	purego := engineChoice{name: "purego", blas: goBLASName, impl: goBLASImpl{}}
	if own := ownBF16(); own != nil {
		purego.blas, purego.bf16 = goBLASName+"+"+ownBF16Name, own
	}
	load := func(name string, names []string, loader func([]string) (blas.Float32, string, error)) engineChoice {
		impl, detail, err := loader(names)
		if err != nil {
			return engineChoice{err: fmt.Errorf("%s=%s: %w", EngineEnv, name, err)}
		}
		bf16, _ := impl.(bf16Gemmer)
		return engineChoice{name: name, blas: name, detail: detail, impl: impl, bf16: bf16}
	}
	openblas := func() engineChoice { return load("openblas", libs.openblas, loadOpenBLAS) }
	onednn := func() engineChoice { return load("onednn", libs.onednn, loadOneDNN) }
	switch strings.TrimSpace(want) {
	case "purego":
		return purego
	case "openblas":
		return openblas()
	case "onednn":
		return onednn()
	case "", "auto":
		if ownFirst && purego.bf16 != nil && !amx {
			purego.name = "auto"
			return purego
		}
		dnn := onednn()
		switch {
		case ownFirst && dnn.err == nil:
			return engineChoice{name: "auto", blas: goBLASName + "+onednn-bf16", detail: dnn.detail,
				impl: purego.impl, bf16: dnn.bf16}
		case ownFirst:
			return purego
		case dnn.err == nil:
			return dnn
		}
		if c := openblas(); c.err == nil {
			return c
		}
		return purego
	}
	return engineChoice{err: fmt.Errorf("%s=%q: want one of %s (or unset for the best installed): %w",
		EngineEnv, want, strings.Join(Engines, ", "), ErrEngine)}
}
