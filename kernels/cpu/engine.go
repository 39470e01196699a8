package cpu

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/zbench/zbench/kernels/cpu/internal/sgemmasm"
)

// EngineEnv is the environment variable that chooses the CPU backend's
// engine, the implementation behind its matrix products: "purego" (gonum's
// Go BLAS with our own blocked, vectorised SGEMM, sgemm.go), "openblas"
// (OpenBLAS, loaded at run time), or unset (or "auto") for the faster of
// the two that this machine has: our SGEMM where its AVX-512 kernel runs
// (measured ahead of OpenBLAS 0.3.21, whose newest kernels there are
// AVX2), else OpenBLAS when it is installed, else pure Go. A choice that
// cannot be loaded is an error, never a fallback.
const EngineEnv = "ZBENCH_CPU_ENGINE"

// Engines are the engines EngineEnv names.
var Engines = []string{"purego", "openblas"}

// ErrEngine marks an engine that cannot be used.
var ErrEngine = errors.New("CPU engine unavailable")

// engineChoice is the process's engine: blas32's implementation is
// global, so every Backend of a process shares it.
type engineChoice struct {
	name   string       // "purego" or "openblas"
	blas   string       // the BLAS, as DeviceInfo.BLAS names it: goBLASName or "openblas"
	detail string       // the library's own description, for openblas
	impl   blas.Float32 // what blas32 is to use
	err    error
}

var engine = chooseEngine(os.Getenv(EngineEnv), openBLASNames, sgemmasm.Available512)

func init() {
	if engine.impl != nil {
		blas32.Use(engine.impl)
	}
}

// openBLASNames are the shared objects tried, in order: Debian's
// libopenblas0 (pthread or openmp flavour, through the alternatives
// system), then an unversioned development link.
var openBLASNames = []string{"libopenblas.so.0", "libopenblas.so"}

// chooseEngine resolves a value of EngineEnv, loading OpenBLAS from the
// first of names that loads when it is wanted; ownFirst says that our
// SGEMM is the faster on this machine.
func chooseEngine(want string, names []string, ownFirst bool) engineChoice {
	purego := engineChoice{name: "purego", blas: goBLASName, impl: goBLASImpl{}}
	openblas := func() engineChoice {
		impl, detail, err := loadOpenBLAS(names)
		if err != nil {
			return engineChoice{err: err}
		}
		return engineChoice{name: "openblas", blas: "openblas", detail: detail, impl: impl}
	}
	switch strings.TrimSpace(want) {
	case "purego":
		return purego
	case "", "auto":
		if ownFirst {
			return purego
		}
		if c := openblas(); c.err == nil {
			return c
		}
		return purego
	case "openblas":
		c := openblas()
		if c.err != nil {
			c.err = fmt.Errorf("%s=openblas: %w", EngineEnv, c.err)
		}
		return c
	}
	return engineChoice{err: fmt.Errorf("%s=%q: want one of %s (or unset for the best installed): %w",
		EngineEnv, want, strings.Join(Engines, ", "), ErrEngine)}
}

// openBLAS reports whether the matrix products run on OpenBLAS, whose own
// threads the backend leaves the cores to.
func openBLAS() bool { return engine.name == "openblas" }
