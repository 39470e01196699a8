//go:build cuda

package cuda

// The driver calls github.com/mumax/3/cuda/cu does not wrap: events, stream
// capture into graphs, function attributes, the profiler's region marks and
// a kernel launch that takes arguments of any size (a CUtensorMap is 128
// bytes). Every function here
// makes the backend's context current first, because goroutines move
// between threads and the driver's current context is per thread.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <cudaProfiler.h>
#include <stdlib.h>

// SET_CTX makes ctx current on the calling thread or returns the failure;
// it declares the CUresult r the functions below reuse.
#define SET_CTX(ctx) CUresult r = cuCtxSetCurrent(ctx); if (r != CUDA_SUCCESS) return r

static CUresult zbLaunch(CUcontext ctx, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
		unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s,
		char* args, const int* offsets, int nargs) {
	void* params[32];
	SET_CTX(ctx);
	if (nargs > 32) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < nargs; i++) params[i] = args + offsets[i];
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, NULL);
}

static CUresult zbProfiler(CUcontext ctx, int start) {
	SET_CTX(ctx);
	return start ? cuProfilerStart() : cuProfilerStop();
}

static CUresult zbFuncSetSmem(CUcontext ctx, CUfunction f, int bytes) {
	SET_CTX(ctx);
	return cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

static CUresult zbEventCreate(CUcontext ctx, CUevent* e) {
	SET_CTX(ctx);
	return cuEventCreate(e, CU_EVENT_DEFAULT);
}

static CUresult zbEventRecord(CUcontext ctx, CUevent e, CUstream s) {
	SET_CTX(ctx);
	return cuEventRecord(e, s);
}

static CUresult zbEventElapsed(CUcontext ctx, CUevent start, CUevent stop, float* ms) {
	SET_CTX(ctx);
	r = cuEventSynchronize(stop);
	if (r != CUDA_SUCCESS) return r;
	return cuEventElapsedTime(ms, start, stop);
}

static CUresult zbEventDestroy(CUcontext ctx, CUevent e) {
	SET_CTX(ctx);
	return cuEventDestroy(e);
}

static CUresult zbBeginCapture(CUcontext ctx, CUstream s) {
	SET_CTX(ctx);
	return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
}

static CUresult zbEndCapture(CUcontext ctx, CUstream s, CUgraph* g, CUgraphExec* exec) {
	SET_CTX(ctx);
	*exec = NULL;
	r = cuStreamEndCapture(s, g);
	if (r != CUDA_SUCCESS) return r;
	return cuGraphInstantiateWithFlags(exec, *g, 0);
}

static CUresult zbGraphLaunch(CUcontext ctx, CUgraphExec exec, CUstream s) {
	SET_CTX(ctx);
	return cuGraphLaunch(exec, s);
}

static CUresult zbGraphDestroy(CUcontext ctx, CUgraph g, CUgraphExec exec) {
	SET_CTX(ctx);
	if (exec != NULL) {
		r = cuGraphExecDestroy(exec);
		if (r != CUDA_SUCCESS) return r;
	}
	if (g != NULL) return cuGraphDestroy(g);
	return CUDA_SUCCESS;
}

static CUresult zbStreamCreate(CUcontext ctx, CUstream* s) {
	SET_CTX(ctx);
	return cuStreamCreate(s, CU_STREAM_NON_BLOCKING);
}

static CUresult zbModuleLoad(CUcontext ctx, CUmodule* m, const void* image) {
	SET_CTX(ctx);
	return cuModuleLoadData(m, image);
}

static CUresult zbModuleFunction(CUmodule m, CUfunction* f, const char* name) {
	return cuModuleGetFunction(f, m, name);
}

// zbHostAlloc returns pinned host memory that kernels can write through
// the same address (unified addressing).
static CUresult zbHostAlloc(CUcontext ctx, size_t bytes, void** host, CUdeviceptr* dev) {
	SET_CTX(ctx);
	r = cuMemHostAlloc(host, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
	if (r != CUDA_SUCCESS) return r;
	return cuMemHostGetDevicePointer(dev, *host, 0);
}

static CUresult zbHostFree(CUcontext ctx, void* host) {
	SET_CTX(ctx);
	return cuMemFreeHost(host);
}

static const char* zbErrorName(CUresult r) {
	const char* s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS) return NULL;
	return s;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/mumax/3/cuda/cu"

	"github.com/zbench/zbench/kernels"
)

// result turns a driver status into nil or an error naming the call. Out
// of memory wraps kernels.ErrOutOfMemory; everything else ErrBackend.
func result(r C.CUresult, what string) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return statusError(cu.Result(r), what)
}

func statusError(r cu.Result, what string) error {
	sentinel := kernels.ErrBackend
	switch r {
	case cu.ERROR_OUT_OF_MEMORY:
		sentinel = kernels.ErrOutOfMemory
	case cu.ERROR_NO_DEVICE, cu.Result(C.CUDA_ERROR_STUB_LIBRARY), cu.ERROR_NOT_INITIALIZED,
		cu.Result(C.CUDA_ERROR_SYSTEM_DRIVER_MISMATCH):
		sentinel = kernels.ErrNoDevice
	}
	name := "CUDA error"
	switch s := C.zbErrorName(C.CUresult(r)); {
	case r == cu.Result(C.CUDA_ERROR_STUB_LIBRARY):
		name = "CUDA_ERROR_STUB_LIBRARY (the link-time stub, not an NVIDIA driver)"
	case s != nil:
		name = C.GoString(s)
	}
	return fmt.Errorf("%s: %s (%d): %w", what, name, int(r), sentinel)
}

// guard calls a function of the cu package, which panics on a failed
// call, and turns the panic into an error: the one place where a driver
// panic is recovered.
func guard(what string, f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if r, ok := p.(cu.Result); ok {
				err = statusError(r, what)
				return
			}
			panic(p)
		}
	}()
	f()
	return nil
}

// ctxOf and streamOf reinterpret the cu package's handles (uintptr) as
// the driver's pointer types.
func ctxOf(c cu.Context) C.CUcontext { return *(*C.CUcontext)(unsafe.Pointer(&c)) }

func streamOf(s cu.Stream) C.CUstream { return *(*C.CUstream)(unsafe.Pointer(&s)) }

func newStream(ctx cu.Context) (cu.Stream, error) {
	var s C.CUstream
	if err := result(C.zbStreamCreate(ctxOf(ctx), &s), "cuStreamCreate"); err != nil {
		return 0, err
	}
	return *(*cu.Stream)(unsafe.Pointer(&s)), nil
}

// loadModule loads a PTX or cubin image.
func loadModule(ctx cu.Context, image []byte, name string) (C.CUmodule, error) {
	buf := C.CBytes(append(image[:len(image):len(image)], 0)) // PTX must end in NUL
	defer C.free(buf)
	var m C.CUmodule
	if err := result(C.zbModuleLoad(ctxOf(ctx), &m, buf), "cuModuleLoadData "+name); err != nil {
		return nil, err
	}
	return m, nil
}

func moduleFunction(m C.CUmodule, name string) (C.CUfunction, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.CUfunction
	if err := result(C.zbModuleFunction(m, &f, cs), "cuModuleGetFunction "+name); err != nil {
		return nil, err
	}
	return f, nil
}

func setMaxDynamicSmem(ctx cu.Context, f C.CUfunction, bytes int, name string) error {
	return result(C.zbFuncSetSmem(ctxOf(ctx), f, C.int(bytes)), "cuFuncSetAttribute "+name)
}

// hostAlloc returns pinned, device-mapped host memory and its device address.
func hostAlloc(ctx cu.Context, bytes int) (unsafe.Pointer, devptr, error) {
	var host unsafe.Pointer
	var dev C.CUdeviceptr
	if err := result(C.zbHostAlloc(ctxOf(ctx), C.size_t(bytes), &host, &dev), "cuMemHostAlloc"); err != nil {
		return nil, 0, err
	}
	return host, devptr(dev), nil
}

func hostFree(ctx cu.Context, host unsafe.Pointer) error {
	return result(C.zbHostFree(ctxOf(ctx), host), "cuMemFreeHost")
}

// cfunction and cmodule are the driver's kernel and module handles.
type (
	cfunction = C.CUfunction
	cmodule   = C.CUmodule
)

// argBuffer holds the packed arguments of one launch in C memory: each
// argument at an offset aligned to its size (64 for a tensor map).
type argBuffer struct {
	data    *C.char
	offsets *C.int
	cap     int
}

const maxArgs = 32

func newArgBuffer() *argBuffer {
	const size = 4096
	return &argBuffer{
		data:    (*C.char)(C.aligned_alloc(64, size)),
		offsets: (*C.int)(C.malloc(C.size_t(maxArgs * C.sizeof_int))),
		cap:     size,
	}
}

func (a *argBuffer) free() {
	C.free(unsafe.Pointer(a.data))
	C.free(unsafe.Pointer(a.offsets))
}

// pack writes args into the buffer and returns their number.
func (a *argBuffer) pack(name string, args []any) (int, error) {
	if len(args) > maxArgs {
		return 0, fmt.Errorf("launch %s: %d arguments, at most %d: %w", name, len(args), maxArgs, kernels.ErrBackend)
	}
	data := unsafe.Slice((*byte)(unsafe.Pointer(a.data)), a.cap)
	offs := unsafe.Slice((*C.int)(a.offsets), maxArgs)
	off := 0
	put := func(i int, b []byte, align int) error {
		off = (off + align - 1) &^ (align - 1)
		if off+len(b) > a.cap {
			return fmt.Errorf("launch %s: arguments exceed %d bytes: %w", name, a.cap, kernels.ErrBackend)
		}
		copy(data[off:], b)
		offs[i] = C.int(off)
		off += len(b)
		return nil
	}
	for i, v := range args {
		var err error
		switch x := v.(type) {
		case devptr:
			err = put(i, unsafe.Slice((*byte)(unsafe.Pointer(&x)), 8), 8)
		case int64:
			err = put(i, unsafe.Slice((*byte)(unsafe.Pointer(&x)), 8), 8)
		case int32:
			err = put(i, unsafe.Slice((*byte)(unsafe.Pointer(&x)), 4), 4)
		case float32:
			err = put(i, unsafe.Slice((*byte)(unsafe.Pointer(&x)), 4), 4)
		case tensorMap:
			err = put(i, x[:], 64)
		default:
			err = fmt.Errorf("launch %s: argument %d has unsupported type %T: %w", name, i, v, kernels.ErrBackend)
		}
		if err != nil {
			return 0, err
		}
	}
	return len(args), nil
}

func launchKernel(ctx cu.Context, f C.CUfunction, grid, block dim3, smem int, s cu.Stream, a *argBuffer, n int, name string) error {
	r := C.zbLaunch(ctxOf(ctx), f, C.uint(grid.x), C.uint(grid.y), C.uint(grid.z),
		C.uint(block.x), C.uint(block.y), C.uint(block.z), C.uint(smem), streamOf(s), a.data, a.offsets, C.int(n))
	if r == C.CUDA_SUCCESS { // the message is built only for a failure: this runs every launch
		return nil
	}
	return result(r, "launch "+name)
}

// event is a CUDA event in the backend's context.
type event struct {
	ctx cu.Context
	e   C.CUevent
}

func newEvent(ctx cu.Context) (*event, error) {
	ev := &event{ctx: ctx}
	if err := result(C.zbEventCreate(ctxOf(ctx), &ev.e), "cuEventCreate"); err != nil {
		return nil, err
	}
	return ev, nil
}

func (e *event) record(s cu.Stream) error {
	return result(C.zbEventRecord(ctxOf(e.ctx), e.e, streamOf(s)), "cuEventRecord")
}

// since waits for e and returns the milliseconds from start to e.
func (e *event) since(start *event) (float32, error) {
	var ms C.float
	if err := result(C.zbEventElapsed(ctxOf(e.ctx), start.e, e.e, &ms), "cuEventElapsedTime"); err != nil {
		return 0, err
	}
	return float32(ms), nil
}

func (e *event) destroy() error { return result(C.zbEventDestroy(ctxOf(e.ctx), e.e), "cuEventDestroy") }

// graphExec is an instantiated CUDA graph.
type graphExec struct {
	g    C.CUgraph
	exec C.CUgraphExec
}

func beginCapture(ctx cu.Context, s cu.Stream) error {
	return result(C.zbBeginCapture(ctxOf(ctx), streamOf(s)), "cuStreamBeginCapture")
}

func endCapture(ctx cu.Context, s cu.Stream) (*graphExec, error) {
	ge := &graphExec{}
	err := result(C.zbEndCapture(ctxOf(ctx), streamOf(s), &ge.g, &ge.exec), "cuStreamEndCapture")
	if err != nil {
		_ = C.zbGraphDestroy(ctxOf(ctx), ge.g, ge.exec)
		return nil, err
	}
	return ge, nil
}

func (ge *graphExec) launch(ctx cu.Context, s cu.Stream) error {
	return result(C.zbGraphLaunch(ctxOf(ctx), ge.exec, streamOf(s)), "cuGraphLaunch")
}

func (ge *graphExec) destroy(ctx cu.Context) error {
	return result(C.zbGraphDestroy(ctxOf(ctx), ge.g, ge.exec), "cuGraphDestroy")
}

// profiler marks the start (start) or end of the profiled region in ctx.
func profiler(ctx cu.Context, start bool) error {
	what := "cuProfilerStop"
	if start {
		what = "cuProfilerStart"
	}
	return result(C.zbProfiler(ctxOf(ctx), C.int(boolInt(start))), what)
}
