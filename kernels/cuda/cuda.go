//go:build cuda

// Package cuda is zbench's NVIDIA GPU backend. Memory, modules, streams and
// launches go through the CUDA driver API (github.com/mumax/3/cuda/cu and a
// small cgo file for what that package lacks: events, graphs, function
// attributes, tensor maps). The kernels are our own CUDA C++ in *.cu,
// compiled by `make kernels` into ptx/ (portable compute_75 and compute_80
// PTX, and sm_90a cubins for Hopper) and embedded; the loader picks the best
// image for the device.
//
// The package builds only with the build tag cuda. Importing it registers
// the backend as "cuda"; without a GPU or a driver, opening it fails with an
// error wrapping kernels.ErrNoDevice and the device list is unchanged.
//
// All work is queued on one stream, so a buffer freed to the pool and handed
// out again is only touched after the work queued before it. Errors that
// kernels find in the data (an embedding id out of range) are reported by
// the next Sync, as CUDA reports asynchronous errors.
package cuda

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/mumax/3/cuda/cu"

	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/kernels/check"
	"github.com/zbench/zbench/kernels/mempool"
)

//go:embed ptx
var images embed.FS

func init() {
	kernels.Register("cuda", func() (kernels.Backend, error) { return New(0) })
}

// devptr is a device address.
type devptr uintptr

// tensorMap is a CUtensorMap passed to a kernel by value.
type tensorMap [128]byte

// dim3 is a grid or block size.
type dim3 struct{ x, y, z int }

// function is a kernel and the dynamic shared memory it is allowed.
type function struct {
	f    cfunction
	smem int
}

// Backend is one GPU: a context, a stream, the loaded kernels and a caching
// memory pool. Like every backend it is used by one goroutine at a time.
type Backend struct {
	dev    cu.Device
	ctx    cu.Context
	stream cu.Stream
	info   kernels.DeviceInfo
	major  int
	minor  int
	l2     int64
	target string
	// preferred is a target whose image of a source, where ptx/ has
	// one, is loaded in place of target's (preferredTarget).
	preferred string

	modules map[string]cmodule // the module that defines each kernel
	funcs   map[string]*function
	args    *argBuffer
	pool    *mempool.Pool[devptr]

	errHost     unsafe.Pointer // error records written by kernels, see errorRecords
	errDev      devptr
	checkBounds [numChecks]int // the bound of each check's valid range, see checkNames

	work      arena  // operations' workspace (workspace)
	partials  arena  // split-K MatMul's partial products, apart from the workspace that operations composed of MatMul hold
	transB    arena  // the Hopper tf32 MatMul's B transposed to [N, K]
	adamw     arena  // AdamWAll's table of parameters (adamwTable)
	adamwLast []byte // the table last copied into adamw

	flush     devptr // L2-sized buffer for FlushCache
	capturing bool
	closed    bool

	// record, when set, receives every launch instead of the driver, and
	// driver calls are skipped: the dry run of the tests that check each
	// launch against the kernel's parameters without a GPU.
	record   func(name string, grid, block dim3, smem int, args []any)
	fakeNext devptr
}

var (
	_ kernels.Backend      = (*Backend)(nil)
	_ kernels.Capturer     = (*Backend)(nil)
	_ kernels.CacheFlusher = (*Backend)(nil)
)

// New opens GPU number ordinal. Without a driver or a device it returns an
// error wrapping kernels.ErrNoDevice.
func New(ordinal int) (*Backend, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b := &Backend{funcs: map[string]*function{}}
	var n int
	if err := guard("cuInit", func() { cu.Init(0); n = cu.DeviceGetCount() }); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d of %d: %w", ordinal, n, kernels.ErrNoDevice)
	}
	var version int
	err := guard("cuda device properties", func() {
		b.dev = cu.DeviceGet(ordinal)
		b.major, b.minor = b.dev.ComputeCapability()
		b.l2 = int64(b.dev.Attribute(cu.L2_CACHE_SIZE))
		version = cu.Version()
		b.info = kernels.DeviceInfo{
			Kind:     kernels.GPU,
			Name:     b.dev.Name(),
			Driver:   fmt.Sprintf("%d.%d", version/1000, version%1000/10),
			Arch:     fmt.Sprintf("%d.%d", b.major, b.minor),
			Cores:    b.dev.Attribute(cu.MULTIPROCESSOR_COUNT),
			Memory:   b.dev.TotalMem(),
			BLAS:     "zbench",
			ClockMHz: b.dev.Attribute(cu.CLOCK_RATE) / 1000,
			L2Bytes:  b.l2,
		}
		b.info.Attention = flashKind(b.major, b.minor, os.Getenv(FlashEnv))
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	b.target, b.preferred = imageTarget(b.major, b.minor), preferredTarget(b.major, b.minor)
	if b.target == "" {
		return nil, fmt.Errorf("cuda: %s has compute capability %d.%d; zbench's kernels need 7.5 or newer: %w",
			b.info.Name, b.major, b.minor, kernels.ErrNoDevice)
	}
	if err := guard("cuCtxCreate", func() { b.ctx = cu.CtxCreate(0, b.dev) }); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if err := b.setUp(); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("cuda: %s: %w", b.info.Name, err)
	}
	return b, nil
}

// imageTarget names the kernel images for a compute capability: the sm_90a
// cubins on Hopper, compute_80 PTX on Ampere and newer, compute_75 PTX on
// Turing. Empty means the device is too old.
func imageTarget(major, minor int) string {
	switch {
	case major == 9 && minor == 0:
		return "sm_90a"
	case major >= 8:
		return "compute_80"
	case major == 7 && minor >= 5:
		return "compute_75"
	}
	return ""
}

// preferredTarget names the images that replace imageTarget's for the
// sources make kernels builds them for (build-kernels.sh's
// extra_targets): compute_89 PTX on Ada (8.9), where FP8's instructions
// are; empty on other devices.
func preferredTarget(major, minor int) string {
	if major == 8 && minor == 9 {
		return "compute_89"
	}
	return ""
}

// hasImage reports whether ptx/ holds the named source's image for
// target.
func hasImage(source, target string) bool {
	entries, err := images.ReadDir("ptx")
	if err != nil {
		return false
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), source+"."+target+".") {
			return true
		}
	}
	return false
}

func (b *Backend) setUp() error {
	var err error
	if b.stream, err = newStream(b.ctx); err != nil {
		return err
	}
	if err := b.loadModules(); err != nil {
		return err
	}
	b.args = newArgBuffer()
	if b.errHost, b.errDev, err = hostAlloc(b.ctx, 16*int(numChecks)); err != nil {
		return err
	}
	b.clearErrorWord()
	b.pool = mempool.New(b.memAlloc, b.memFree, 0)
	return nil
}

// loadModules loads every image of the device's target from ptx/, or the
// preferred target's image of the same source where there is one, and
// records which module defines each kernel.
func (b *Backend) loadModules() error {
	entries, err := images.ReadDir("ptx")
	if err != nil {
		return fmt.Errorf("reading embedded kernels: %w", err)
	}
	b.modules = map[string]cmodule{}
	loaded := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.Contains(name, "."+b.target+".") {
			continue
		}
		if source, _, _ := strings.Cut(name, "."); b.preferred != "" && hasImage(source, b.preferred) {
			name = source + "." + b.preferred + ".ptx"
		}
		img, err := images.ReadFile(path.Join("ptx", name))
		if err != nil {
			return fmt.Errorf("reading embedded kernels: %w", err)
		}
		kernelNames, err := imageEntries(name, img)
		if err != nil {
			return fmt.Errorf("%w: %w", err, kernels.ErrBackend)
		}
		m, err := loadModule(b.ctx, img, name)
		if err != nil {
			return err
		}
		loaded++
		for _, k := range kernelNames {
			b.modules[k] = m
		}
	}
	if loaded == 0 {
		return fmt.Errorf("no kernel images for %s in ptx/ (run make kernels): %w", b.target, kernels.ErrBackend)
	}
	return nil
}

// function returns the named kernel, allowing it smem bytes of dynamic
// shared memory.
func (b *Backend) function(name string, smem int) (*function, error) {
	fn, ok := b.funcs[name]
	if !ok {
		m, ok := b.modules[name]
		if !ok {
			return nil, fmt.Errorf("no kernel %s in the %s images: %w", name, b.target, kernels.ErrBackend)
		}
		f, err := moduleFunction(m, name)
		if err != nil {
			return nil, err
		}
		fn = &function{f: f}
		b.funcs[name] = fn
	}
	if smem > 48<<10 && smem > fn.smem {
		if err := setMaxDynamicSmem(b.ctx, fn.f, smem, name); err != nil {
			return nil, err
		}
		fn.smem = smem
	}
	return fn, nil
}

// launch queues kernel name on the stream. args are devptr, int32, int64,
// float32 or tensorMap values, in the kernel's parameter order. Kernels of
// several float dtypes are named after the dtype's String: add_f32,
// add_f16, add_bf16.
func (b *Backend) launch(name string, grid, block dim3, smem int, args ...any) error {
	grid, block = grid.filled(), block.filled()
	if b.record != nil {
		b.record(name, grid, block, smem, args)
		return nil
	}
	fn, err := b.function(name, smem)
	if err != nil {
		return err
	}
	n, err := b.args.pack(name, args)
	if err != nil {
		return err
	}
	return launchKernel(b.ctx, fn.f, grid, block, smem, b.stream, b.args, n, name)
}

// filled turns zero sizes into 1.
func (d dim3) filled() dim3 {
	return dim3{max(d.x, 1), max(d.y, 1), max(d.z, 1)}
}

// call runs f, a function of the cu package, with the context current on
// this thread, turning its panic into an error.
func (b *Backend) call(what string, f func()) error {
	if b.record != nil {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return guard(what, func() {
		cu.CtxSetCurrent(b.ctx)
		f()
	})
}

func (b *Backend) memAlloc(n int64) (devptr, error) {
	if b.record != nil { // a dry run: addresses that are never dereferenced
		b.fakeNext += devptr((n + 255) &^ 255)
		return b.fakeNext, nil
	}
	var p cu.DevicePtr
	err := b.call(fmt.Sprintf("cuMemAlloc of %d bytes", n), func() { p = cu.MemAlloc(n) })
	return devptr(p), err
}

func (b *Backend) memFree(p devptr) {
	_ = b.call("cuMemFree", func() { cu.MemFree(cu.DevicePtr(p)) })
}

// storage is the handle a CUDA tensor carries.
type storage struct {
	ptr   devptr
	class int64
}

// ptrOf returns t's device address.
func ptrOf(t *kernels.Tensor) devptr {
	if t == nil {
		return 0
	}
	return t.Storage().(*storage).ptr
}

// Name returns "cuda".
func (b *Backend) Name() string { return "cuda" }

// Info describes the GPU.
func (b *Backend) Info() kernels.DeviceInfo { return b.info }

// Alloc returns a tensor from the pool; its contents are undefined.
func (b *Backend) Alloc(dt kernels.DType, shape ...int) (*kernels.Tensor, error) {
	s := kernels.Shape(shape)
	if !dt.Valid() {
		return nil, fmt.Errorf("cuda: alloc %v%v: %w", dt, s, kernels.ErrDType)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("cuda: alloc %v%v: %w", dt, s, err)
	}
	n := int64(s.Len()) * int64(dt.Size())
	p, class, err := b.pool.Get(max(n, 1))
	if err != nil {
		return nil, fmt.Errorf("cuda: alloc %v%v (%d bytes) on %s: %w", dt, s, n, b.info.Name, err)
	}
	return kernels.NewTensor(b, dt, s, &storage{ptr: p, class: class}), nil
}

// Free returns t's memory to the pool.
func (b *Backend) Free(t *kernels.Tensor) error {
	if err := check.Op("cuda: free").Tensor("t", t, b).Err(); err != nil {
		return err
	}
	st := t.Storage().(*storage)
	b.pool.Put(st.ptr, st.class)
	t.MarkFreed()
	return nil
}

// Upload copies src into t and waits for the copy.
func (b *Backend) Upload(t *kernels.Tensor, src []byte) error {
	if err := check.Op("cuda: upload").Tensor("t", t, b).
		That(int64(len(src)) == t.Bytes(), kernels.ErrShape, "%d bytes for %v (%d bytes)", len(src), t, t.Bytes()).Err(); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	return b.call("cuda: upload "+t.String(), func() {
		cu.MemcpyHtoDAsync(cu.DevicePtr(ptrOf(t)), unsafe.Pointer(&src[0]), int64(len(src)), b.stream)
		b.stream.Synchronize()
	})
}

// Download waits for the queued work and copies t into dst.
func (b *Backend) Download(dst []byte, t *kernels.Tensor) error {
	if err := check.Op("cuda: download").Tensor("t", t, b).
		That(int64(len(dst)) == t.Bytes(), kernels.ErrShape, "%d bytes for %v (%d bytes)", len(dst), t, t.Bytes()).Err(); err != nil {
		return err
	}
	if len(dst) == 0 {
		return b.Sync()
	}
	if err := b.call("cuda: download "+t.String(), func() {
		cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), cu.DevicePtr(ptrOf(t)), int64(len(dst)), b.stream)
		b.stream.Synchronize()
	}); err != nil {
		return err
	}
	return b.takeError()
}

// Sync waits for every queued operation and reports an error a kernel
// found in its data since the last Sync.
func (b *Backend) Sync() error {
	if b.capturing {
		return fmt.Errorf("cuda: sync during graph capture: %w", kernels.ErrValue)
	}
	if err := b.call("cuda: sync", func() { b.stream.Synchronize() }); err != nil {
		return err
	}
	return b.takeError()
}

// errorRecords views the pinned error records, one per check: flag,
// value, position, unused.
func (b *Backend) errorRecords() []int32 { return unsafe.Slice((*int32)(b.errHost), 4*numChecks) }

func (b *Backend) clearErrorWord() { clear(b.errorRecords()) }

// A deviceCheck is a data validation done on the device; each has its own
// error record, so that the message names the operation and the tensor.
type deviceCheck int

const (
	checkEmbedding deviceCheck = iota
	checkEmbeddingBackward
	checkCrossEntropy
	checkCrossEntropyBackward
	checkSoftmaxLens
	checkAttentionLens
	checkAttentionPackedLens
	checkAttentionBackwardLens
	checkCacheWriteStart
	checkCachedAttentionLens
	checkPagedCacheWriteStart
	checkPagedCacheWriteTable
	checkPagedAttentionLens
	checkPagedAttentionTable
	numChecks
)

// checkNames are the operation and tensor each check reports, and its
// valid range as a format of the bound errorSlot was given; a check of a
// matrix (twoD) records the row and column of the value.
var checkNames = [numChecks]struct {
	op, tensor, valid string
	twoD              bool
}{
	checkEmbedding:             {"Embedding", "ids", "[0, %d)", false},
	checkEmbeddingBackward:     {"EmbeddingBackward", "ids", "[0, %d)", false},
	checkCrossEntropy:          {"CrossEntropy", "targets", "[0, %d) and not " + strconv.Itoa(kernels.IgnoreIndex), false},
	checkCrossEntropyBackward:  {"CrossEntropyBackward", "targets", "[0, %d) and not " + strconv.Itoa(kernels.IgnoreIndex), false},
	checkSoftmaxLens:           {"Softmax", "KeyLens", "[0, %d]", false},
	checkAttentionLens:         {"Attention", "KeyLens", "[0, %d]", false},
	checkAttentionPackedLens:   {"AttentionPacked", "KeyLens", "[0, %d]", false},
	checkAttentionBackwardLens: {"AttentionBackward", "KeyLens", "[0, %d]", false},
	checkCacheWriteStart:       {"CacheWrite", "start", "[0, %d] (the cache's length less the new positions)", false},
	checkCachedAttentionLens:   {"CachedAttention", "lens", "[the query count, %d]", false},
	checkPagedCacheWriteStart:  {"PagedCacheWrite", "start", "[0, %d] (a table row's positions less the new ones)", false},
	checkPagedCacheWriteTable:  {"PagedCacheWrite", "table", "[0, %d) (the pool's blocks)", true},
	checkPagedAttentionLens:    {"PagedAttention", "lens", "[the query count, %d] (a table row's positions)", false},
	checkPagedAttentionTable:   {"PagedAttention", "table", "[0, %d) (the pool's blocks)", true},
}

// errorSlot returns the device address of c's record and remembers the
// bound of the valid range to report (30522 for "[0, 30522)"); the message
// is formatted only when the check fails.
func (b *Backend) errorSlot(c deviceCheck, bound int) devptr {
	b.checkBounds[c] = bound
	return b.errDev + devptr(16*c)
}

// checkRange queues a check that every value of the I32 tensor v lies in
// [lo, hi) or equals except; bound is errorSlot's.
func (b *Backend) checkRange(c deviceCheck, v *kernels.Tensor, lo, hi, except int32, bound int) error {
	n := int64(v.Len())
	if n == 0 {
		return nil
	}
	return b.launch("check_range", b.gridFor(n), dim3{x: block}, 0,
		ptrOf(v), n, lo, hi, except, b.errorSlot(c, bound))
}

// takeError returns and clears the errors kernels recorded.
func (b *Backend) takeError() error {
	recs := b.errorRecords()
	var errs []error
	for c := range numChecks {
		r := recs[4*c : 4*c+4]
		if r[0] == 0 {
			continue
		}
		n := checkNames[c]
		at := fmt.Sprint(r[2])
		if n.twoD {
			at = fmt.Sprintf("%d, %d", r[2], r[3])
		}
		errs = append(errs, fmt.Errorf("cuda: %s: %s[%s] = %d is out of range %s: %w",
			n.op, n.tensor, at, r[1], fmt.Sprintf(n.valid, b.checkBounds[c]), kernels.ErrValue))
	}
	b.clearErrorWord()
	return errors.Join(errs...)
}

// MemStats returns the pool's counters.
func (b *Backend) MemStats() kernels.MemStats { return b.pool.Stats() }

// ResetPeak sets the pool's peak to its current bytes.
func (b *Backend) ResetPeak() { b.pool.ResetPeak() }

// TrimCache frees the pool's cached blocks.
func (b *Backend) TrimCache() { b.pool.Trim() }

// workspace returns scratch memory of at least n bytes for one operation.
func (b *Backend) workspace(n int64) (devptr, error) {
	p, err := b.work.get(n, b.memAlloc)
	if err != nil {
		return 0, fmt.Errorf("cuda: workspace of %d bytes: %w", n, err)
	}
	return p, nil
}

// arena is device scratch memory for one operation at a time, grown on
// demand and never freed before Close, so a captured graph may keep using
// what it was given.
type arena struct {
	all   []devptr // every buffer ever made
	cur   devptr   // the largest, in use
	bytes int64
}

// get returns the arena's buffer once it holds at least n bytes, making a
// new one of at least twice the size with alloc where it holds fewer.
func (a *arena) get(n int64, alloc func(int64) (devptr, error)) (devptr, error) {
	if n <= a.bytes {
		return a.cur, nil
	}
	n = max(n, 2*a.bytes)
	p, err := alloc(n)
	if err != nil {
		return 0, err
	}
	a.all = append(a.all, p)
	a.cur, a.bytes = p, n
	return p, nil
}

// FlushCache evicts the GPU's L2 by writing a buffer of its size.
func (b *Backend) FlushCache() error {
	if b.l2 <= 0 {
		return nil
	}
	if b.flush == 0 {
		p, err := b.memAlloc(b.l2)
		if err != nil {
			return fmt.Errorf("cuda: L2 flush buffer: %w", err)
		}
		b.flush = p
	}
	return b.call("cuda: flush L2", func() {
		cu.MemsetD32Async(cu.DevicePtr(b.flush), 0, b.l2/4, b.stream)
	})
}

// memsetZero queues zeroing n bytes at p (n a multiple of 4).
func (b *Backend) memsetZero(p devptr, n int64) error {
	return b.call("cuda: memset", func() { cu.MemsetD32Async(cu.DevicePtr(p), 0, n/4, b.stream) })
}

// Close frees the device's memory and context.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	var errs []error
	if b.ctx != 0 {
		_ = b.call("cuda: close", func() { b.stream.Synchronize() })
		if b.pool != nil {
			b.pool.Trim()
		}
		for _, p := range slices.Concat(b.work.all, b.partials.all, b.transB.all, b.adamw.all) {
			b.memFree(p)
		}
		if b.flush != 0 {
			b.memFree(b.flush)
		}
		if b.args != nil {
			b.args.free()
		}
		if b.errHost != nil {
			errs = append(errs, hostFree(b.ctx, b.errHost))
		}
		errs = append(errs, b.call("cuCtxDestroy", func() { cu.CtxDestroy(&b.ctx) }))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cuda: close: %w", err)
	}
	return nil
}

// ProfileStart marks the start of the region Nsight Compute records when
// started with --profile-from-start off (cuProfilerStart).
func (b *Backend) ProfileStart() error { return b.profiler(true) }

// ProfileStop marks the end of that region (cuProfilerStop).
func (b *Backend) ProfileStop() error { return b.profiler(false) }

func (b *Backend) profiler(start bool) error {
	if b.record != nil {
		return nil
	}
	if err := profiler(b.ctx, start); err != nil { // one cgo call: the context made current on its thread
		return fmt.Errorf("cuda: %w", err)
	}
	return nil
}

// NewTimer returns a timer of two CUDA events on the stream.
func (b *Backend) NewTimer() (kernels.Timer, error) {
	start, err := newEvent(b.ctx)
	if err != nil {
		return nil, fmt.Errorf("cuda: timer: %w", err)
	}
	stop, err := newEvent(b.ctx)
	if err != nil {
		_ = start.destroy()
		return nil, fmt.Errorf("cuda: timer: %w", err)
	}
	return &timer{b: b, start: start, stop: stop}, nil
}

type timer struct {
	b           *Backend
	start, stop *event
	started     bool
	stopped     bool
}

func (t *timer) Start() error {
	t.started, t.stopped = true, false
	return t.start.record(t.b.stream)
}

func (t *timer) Stop() error {
	if !t.started {
		return fmt.Errorf("cuda: timer stopped before it started: %w", kernels.ErrValue)
	}
	t.stopped = true
	return t.stop.record(t.b.stream)
}

func (t *timer) Elapsed() (time.Duration, error) {
	if !t.started || !t.stopped {
		return 0, fmt.Errorf("cuda: timer read before Start and Stop: %w", kernels.ErrValue)
	}
	ms, err := t.stop.since(t.start)
	if err != nil {
		return 0, fmt.Errorf("cuda: timer: %w", err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

func (t *timer) Close() error {
	e1, e2 := t.start.destroy(), t.stop.destroy()
	if e1 != nil {
		return e1
	}
	return e2
}

// Capture records the operations f queues into a CUDA graph. f must not
// call Sync, Upload or Download, and must not allocate from the pool
// tensors it frees again (the graph would keep writing them).
func (b *Backend) Capture(f func() error) (kernels.Graph, error) {
	if f == nil {
		return nil, fmt.Errorf("cuda: capture of a nil function: %w", kernels.ErrValue)
	}
	if b.capturing {
		return nil, fmt.Errorf("cuda: nested graph capture: %w", kernels.ErrValue)
	}
	if err := beginCapture(b.ctx, b.stream); err != nil {
		return nil, fmt.Errorf("cuda: capture: %w", err)
	}
	b.capturing = true
	ferr := f()
	b.capturing = false
	ge, err := endCapture(b.ctx, b.stream)
	if ferr != nil {
		if ge != nil {
			_ = ge.destroy(b.ctx)
		}
		return nil, fmt.Errorf("cuda: capture: %w", ferr)
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: capture: %w", err)
	}
	return &graph{b: b, ge: ge}, nil
}

type graph struct {
	b  *Backend
	ge *graphExec
}

func (g *graph) Launch() error {
	if g.ge == nil {
		return fmt.Errorf("cuda: launch of a closed graph: %w", kernels.ErrValue)
	}
	return g.ge.launch(g.b.ctx, g.b.stream)
}

func (g *graph) Close() error {
	if g.ge == nil {
		return nil
	}
	err := g.ge.destroy(g.b.ctx)
	g.ge = nil
	return err
}
