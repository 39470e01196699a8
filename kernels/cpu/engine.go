package cpu

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"gonum.org/v1/gonum/blas/blas32"
)

// EngineEnv is the environment variable that chooses the CPU backend's
// engine, the library behind its matrix products: "purego" (gonum's Go
// implementation), "openblas" (OpenBLAS, loaded at run time), or unset
// (or "auto") for OpenBLAS when it is installed and pure Go otherwise. A
// choice that cannot be loaded is an error, never a fallback.
const EngineEnv = "ZBENCH_CPU_ENGINE"

// Engines are the engines EngineEnv names.
var Engines = []string{"purego", "openblas"}

// ErrEngine marks an engine that cannot be used.
var ErrEngine = errors.New("CPU engine unavailable")

// engineChoice is the process's engine: blas32's implementation is
// global, so every Backend of a process shares it.
type engineChoice struct {
	name   string // "purego" or "openblas"
	blas   string // the BLAS, as DeviceInfo.BLAS names it: "gonum" or "openblas"
	detail string // the library's own description, for openblas
	err    error
}

var engine = chooseEngine(os.Getenv(EngineEnv), openBLASNames)

// openBLASNames are the shared objects tried, in order: Debian's
// libopenblas0 (pthread or openmp flavour, through the alternatives
// system), then an unversioned development link.
var openBLASNames = []string{"libopenblas.so.0", "libopenblas.so"}

// chooseEngine resolves a value of EngineEnv, loading OpenBLAS from the
// first of names that loads when it is wanted.
func chooseEngine(want string, names []string) engineChoice {
	purego := engineChoice{name: "purego", blas: "gonum"}
	switch strings.TrimSpace(want) {
	case "purego":
		return purego
	case "", "auto":
		if impl, detail, err := loadOpenBLAS(names); err == nil {
			blas32.Use(impl)
			return engineChoice{name: "openblas", blas: "openblas", detail: detail}
		}
		return purego
	case "openblas":
		impl, detail, err := loadOpenBLAS(names)
		if err != nil {
			return engineChoice{err: fmt.Errorf("%s=openblas: %w", EngineEnv, err)}
		}
		blas32.Use(impl)
		return engineChoice{name: "openblas", blas: "openblas", detail: detail}
	}
	return engineChoice{err: fmt.Errorf("%s=%q: want one of %s (or unset for the best installed): %w",
		EngineEnv, want, strings.Join(Engines, ", "), ErrEngine)}
}

// Engine names the engine this process's CPU backends use ("purego" or
// "openblas") and, for OpenBLAS, the library's description of itself; the
// error is why the engine EngineEnv asks for cannot be used.
func Engine() (name, detail string, err error) {
	return engine.name, engine.detail, engine.err
}

// openBLAS reports whether the matrix products run on OpenBLAS, whose own
// threads the backend leaves the cores to.
func openBLAS() bool { return engine.name == "openblas" }
