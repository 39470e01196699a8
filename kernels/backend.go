package kernels

import "time"

// Kind says what sort of processor a backend drives.
type Kind uint8

// Device kinds.
const (
	CPU Kind = iota + 1
	GPU
)

// DeviceInfo describes the processor behind a backend: what the benchmark
// environment lines print and what the roofline guard needs.
type DeviceInfo struct {
	Kind   Kind
	Name   string // e.g. "AMD EPYC 9R14" or "NVIDIA H100 80GB HBM3"
	Driver string // GPU driver version; on CPU, the BLAS's description of itself (OpenBLAS's openblas_get_config) or empty
	Arch   string // compute capability such as "9.0"; empty on CPU
	Cores  int    // CPU threads used, or GPU multiprocessors
	Memory int64  // bytes of device memory (0 if the host's)
	BLAS   string // matmul library, e.g. "zbench-sgemm", "openblas", "onednn" or "zbench-sgemm+onednn-bf16"

	ClockMHz int   // GPU: the multiprocessors' peak clock; 0 if unknown
	L2Bytes  int64 // GPU: size of the L2 cache; 0 if unknown
	// Attention is the fused attention kernel family a GPU runs ("mma"
	// from compute capability 8.0, "wgmma" on Hopper when chosen); empty
	// where attention is composed of other operations, and on CPU.
	Attention string
}

// MemStats counts a backend's allocations through its caching pool.
type MemStats struct {
	Allocs       int64 // Alloc calls that succeeded
	Hits         int64 // of those, served from the pool's cache
	Returns      int64 // Free calls
	CurrentBytes int64 // bytes held by live tensors
	PeakBytes    int64 // high-water mark of CurrentBytes since the last ResetPeak
	CachedBytes  int64 // bytes kept in the cache for reuse
}

// HitRate is Hits/Allocs, or 0 before any allocation.
func (m MemStats) HitRate() float64 {
	if m.Allocs == 0 {
		return 0
	}
	return float64(m.Hits) / float64(m.Allocs)
}

// Timer measures elapsed time on the device: wall time on a CPU, events
// recorded in the stream on a GPU.
type Timer interface {
	Start() error
	Stop() error
	// Elapsed waits for the stop mark and returns the time between the marks.
	Elapsed() (time.Duration, error)
	Close() error
}

// Backend is a compute device with its memory and operations. Methods are
// safe for use by one goroutine at a time; operations may run asynchronously
// and are ordered, and Sync waits for all of them.
type Backend interface {
	// Name is the device name used in benchmark names: "cpu" or "cuda".
	Name() string
	Info() DeviceInfo

	// Alloc returns a tensor of the given dtype and shape whose contents
	// are undefined. Out of memory is an error wrapping ErrOutOfMemory that
	// names the request.
	Alloc(dt DType, shape ...int) (*Tensor, error)
	// Free returns t's storage to the backend's pool. Freeing twice is an
	// error wrapping ErrFreed.
	Free(t *Tensor) error
	// Upload copies host bytes, in t's dtype, little-endian, into t.
	Upload(t *Tensor, src []byte) error
	// Download copies t into host bytes; it waits for pending work on t.
	Download(dst []byte, t *Tensor) error
	// Sync waits until every queued operation has finished.
	Sync() error
	MemStats() MemStats
	// ResetPeak sets PeakBytes to CurrentBytes.
	ResetPeak()
	// TrimCache releases cached, unused memory.
	TrimCache()
	NewTimer() (Timer, error)
	// Close releases the device; the backend is unusable afterwards.
	Close() error

	Ops
}

// Graph is a recorded sequence of operations that can be replayed with
// fixed arguments and one launch (a CUDA graph on GPUs).
type Graph interface {
	// Launch queues the whole sequence once.
	Launch() error
	Close() error
}

// Capturer is implemented by backends that can record the operations a
// function queues into a Graph instead of running them. Models use it, when
// present, to replay a whole forward pass with one launch.
type Capturer interface {
	// Capture calls f once in recording mode and returns the graph of the
	// operations it queued. The tensors f uses must stay allocated while
	// the graph lives.
	Capture(f func() error) (Graph, error)
}

// Profiled is implemented by devices whose profilers can be told where the
// region of interest starts and ends: on a GPU, cuProfilerStart and
// cuProfilerStop, between which Nsight Compute started with
// --profile-from-start off records kernels.
type Profiled interface {
	// ProfileStart marks the start of the region.
	ProfileStart() error
	// ProfileStop marks its end.
	ProfileStop() error
}

// CacheFlusher is implemented by devices whose caches a benchmark can evict
// before each timed launch (cache=cold): on a GPU, a write over a buffer the
// size of the L2 cache.
type CacheFlusher interface {
	// FlushCache queues the eviction on the device.
	FlushCache() error
}
