// Package cpu is zbench's CPU backend: always built, multi-core, and the
// reference every other backend is tested against. Matrix multiplication goes
// through gonum's blas32, whose implementation is the engine EngineEnv
// chooses: oneDNN or OpenBLAS, loaded at run time when they are installed
// (nothing links against them, so the package builds and runs anywhere),
// or pure Go: gonum's BLAS with our own blocked, vectorised SGEMM
// (sgemm.go). oneDNN also multiplies BF16 in its bfloat16 GEMM. Everything
// else is Go over float32 (AVX-512 assembly for the hot loops, vecmath),
// split across GOMAXPROCS goroutines. F16 and BF16 tensors are computed in
// float32 and rounded to their dtype on store.
//
// Importing the package registers the backend as "cpu" and loads nothing:
// the engine is chosen, and its library loaded, when the first backend
// opens, which fails when EngineEnv names an engine that cannot be loaded.
package cpu

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/mempool"
)

func init() {
	kernels.Register("cpu", func() (kernels.Backend, error) {
		if err := engine().err; err != nil {
			return nil, err
		}
		return New(), nil
	})
}

// Backend is the CPU backend. Its memory pool works as an arena: freed
// buffers are cached by size class and reused.
type Backend struct {
	pool *mempool.Pool[*hostBuf]
	info kernels.DeviceInfo
	bf16 bf16Gemmer // the engine's bfloat16 GEMM, or nil to widen to float32
}

var _ kernels.Backend = (*Backend)(nil)

// storage is the handle a CPU tensor carries: its bytes, 8-byte aligned so
// that they can be viewed as float32 or int32, and the pool block that
// holds them.
type storage struct {
	buf   []byte
	mem   *hostBuf
	class int64
	// packed is the packed form of a weight (PackConvFilters,
	// PackLinear), or nil.
	packed *packedB
	// wino is the Winograd transform of a packed weight's 3×3 filters
	// (winoPanels), made on its first such convolution, or nil.
	wino atomic.Pointer[packedB]
}

// New returns a CPU backend using GOMAXPROCS threads, choosing the
// process's engine on the first call. It panics when EngineEnv names an
// engine that cannot be loaded (kernels.Open("cpu") returns that as an
// error).
func New() *Backend {
	e := engine()
	if e.err != nil {
		panic(e.err)
	}
	pool := mempool.New(newHostBuf, (*hostBuf).release, 0)
	pool.ReleaseIdle(poolIdle)
	return &Backend{
		pool: pool,
		info: kernels.DeviceInfo{Kind: kernels.CPU, Name: cpuModel(), Cores: runtime.GOMAXPROCS(0), BLAS: e.blas, Driver: e.detail},
		bf16: e.bf16,
	}
}

// poolIdle is how long the memory pool keeps the buffers of a size no
// allocation has used: a benchmark's loop uses its sizes again far sooner,
// while a server's steps, whose sizes keep changing, would otherwise leave
// a buffer of every size they ever used.
const poolIdle = 30 * time.Second

// Name returns "cpu".
func (b *Backend) Name() string { return "cpu" }

// Info describes the processor.
func (b *Backend) Info() kernels.DeviceInfo { return b.info }

// Alloc returns a tensor from the pool; its contents are undefined.
func (b *Backend) Alloc(dt kernels.DType, shape ...int) (*kernels.Tensor, error) {
	if !dt.Valid() {
		return nil, fmt.Errorf("cpu: alloc %v%v: %w", dt, kernels.Shape(shape), kernels.ErrDType)
	}
	s := kernels.Shape(shape)
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("cpu: alloc %v%v: %w", dt, s, err)
	}
	n := int64(s.Len()) * int64(dt.Size())
	mem, class, err := b.pool.Get(n)
	if err != nil {
		return nil, fmt.Errorf("cpu: alloc %v%v: %w", dt, s, err)
	}
	return kernels.NewTensor(b, dt, s, &storage{buf: mem.buf[:n], mem: mem, class: class}), nil
}

// Free returns t's buffer to the pool.
func (b *Backend) Free(t *kernels.Tensor) error {
	if err := check.Op("cpu: free").Tensor("t", t, b).Err(); err != nil {
		return err
	}
	st := t.Storage().(*storage)
	b.dropPacked(st)
	b.pool.Put(st.mem, st.class)
	t.MarkFreed()
	return nil
}

// Upload copies src into t.
func (b *Backend) Upload(t *kernels.Tensor, src []byte) error {
	if err := check.Op("cpu: upload").Tensor("t", t, b).
		That(int64(len(src)) == t.Bytes(), kernels.ErrShape, "%d bytes for %v (%d bytes)", len(src), t, t.Bytes()).Err(); err != nil {
		return err
	}
	b.dropPacked(t.Storage().(*storage))
	parallelCopy(bytesOf(t), src)
	return nil
}

// parallelCopy copies src into dst, of the same length, in ranges over the
// cores: a model's weights are megabytes a tensor, and their first copy
// into fresh memory is as much the system's page faults as the copy.
func parallelCopy(dst, src []byte) {
	parallelFor(len(src), 1, func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
}

// Download copies t into dst.
func (b *Backend) Download(dst []byte, t *kernels.Tensor) error {
	if err := check.Op("cpu: download").Tensor("t", t, b).
		That(int64(len(dst)) == t.Bytes(), kernels.ErrShape, "%d bytes for %v (%d bytes)", len(dst), t, t.Bytes()).Err(); err != nil {
		return err
	}
	parallelCopy(dst, bytesOf(t))
	return nil
}

// Sync returns at once: CPU operations are synchronous.
func (b *Backend) Sync() error { return nil }

// MemStats returns the pool's counters.
func (b *Backend) MemStats() kernels.MemStats { return b.pool.Stats() }

// ResetPeak resets the pool's high-water mark.
func (b *Backend) ResetPeak() { b.pool.ResetPeak() }

// TrimCache drops cached buffers.
func (b *Backend) TrimCache() { b.pool.Trim() }

// Close trims the cache.
func (b *Backend) Close() error { b.pool.Trim(); return nil }

// NewTimer returns a wall-clock timer.
func (b *Backend) NewTimer() (kernels.Timer, error) { return &timer{}, nil }

type timer struct{ start, stop time.Time }

func (t *timer) Start() error { t.start = time.Now(); return nil }
func (t *timer) Stop() error  { t.stop = time.Now(); return nil }
func (t *timer) Close() error { return nil }
func (t *timer) Elapsed() (time.Duration, error) {
	if t.start.IsZero() || t.stop.Before(t.start) {
		return 0, fmt.Errorf("cpu: timer read before Start and Stop: %w", kernels.ErrValue)
	}
	return t.stop.Sub(t.start), nil
}

func bytesOf(t *kernels.Tensor) []byte { return t.Storage().(*storage).buf }

// f32 views an F32 tensor's storage.
func f32(t *kernels.Tensor) []float32 {
	buf := bytesOf(t)
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)/4)
}

// i32 views an I32 tensor's storage (or any 4-byte dtype's, as bits).
func i32(t *kernels.Tensor) []int32 {
	buf := bytesOf(t)
	return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)/4)
}

// u16 views an F16 or BF16 tensor's storage (or any 2-byte dtype's, as bits).
func u16(t *kernels.Tensor) []uint16 {
	buf := bytesOf(t)
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)/2)
}

var _ kernels.Capturer = (*Backend)(nil)

// Capture returns a graph that replays f: the CPU runs operations as they
// are called, so recording one is keeping the function. f is not called
// until the first Launch.
func (b *Backend) Capture(f func() error) (kernels.Graph, error) {
	if f == nil {
		return nil, fmt.Errorf("cpu: capture of a nil function: %w", kernels.ErrValue)
	}
	return graph(f), nil
}

// graph replays a captured function.
type graph func() error

func (g graph) Launch() error { return g() }
func (g graph) Close() error  { return nil }
