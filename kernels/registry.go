package kernels

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Opener opens a backend. It returns an error wrapping ErrNoDevice when the
// device is absent at run time (no GPU, no driver).
type Opener func() (Backend, error)

var (
	regMu    sync.Mutex
	registry = map[string]Opener{}
	opened   = map[string]Backend{}
)

// Register makes a backend available by name. Backends call it from init;
// registering a name twice panics, as for database/sql drivers.
func Register(name string, open Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("kernels: Register called twice for backend " + name)
	}
	registry[name] = open
}

// Open returns the named backend, opening it on first use; later calls
// return the same instance.
func Open(name string) (Backend, error) {
	regMu.Lock()
	defer regMu.Unlock()
	if b, ok := opened[name]; ok {
		return b, nil
	}
	open, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("kernels: backend %q is not built in (have %v): %w", name, namesLocked(), ErrNoDevice)
	}
	b, err := open()
	if err != nil {
		return nil, fmt.Errorf("kernels: open %s: %w", name, err)
	}
	opened[name] = b
	return b, nil
}

// Available opens every registered backend and returns those whose device is
// present, "cpu" first then by name. Errors other than a missing device are
// returned beside the backends that did open.
func Available() ([]Backend, error) {
	regMu.Lock()
	names := namesLocked()
	regMu.Unlock()
	var (
		out  []Backend
		errs []error
	)
	for _, n := range names {
		b, err := Open(n)
		switch {
		case err == nil:
			out = append(out, b)
		case !errors.Is(err, ErrNoDevice):
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func namesLocked() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "cpu") != (names[j] == "cpu") {
			return names[i] == "cpu"
		}
		return names[i] < names[j]
	})
	return names
}
