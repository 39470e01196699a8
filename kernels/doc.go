// Package kernels defines what every compute backend of zbench shares: the
// Tensor, its element types (DType) and their conversions, the Backend
// interface with its operations (Ops) and op groups (Quant, Vision,
// Decoder, …; Group returns a backend's), and the sentinel errors every
// failure wraps.
//
// A backend (kernels/cpu, kernels/cuda) registers itself by name with
// Register; Open and Available find it. It validates the arguments of each
// op with package kernels/check, so that every backend turns bad arguments
// into the same clear errors, and it is validated by the one conformance
// suite in kernels/kerneltest.
//
// Tensors are dense and row-major. Their storage belongs to the backend that
// allocated them; host data moves in and out with Upload and Download (bytes in
// the tensor's dtype) or with the float32 helpers FromFloat32 and ToFloat32.
// Operations write into caller-allocated outputs, so that models can run over
// preallocated activation buffers and a CUDA backend can capture them in a
// graph.
package kernels
