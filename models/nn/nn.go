// Package nn holds the model-independent plumbing of zbench's models:
// precisions, parameter lists and their sources (seeded synthetic weights,
// safetensors checkpoints with name mapping, sharded or not), device tensor
// sets and allocation, and optimizer state.
//
// A model package (bert, llama) lists its parameters as Params with its
// checkpoint's names, loads them from a Source into a TensorSet with
// LoadParams, allocates its activation buffers with an Allocator, and, to
// train, keeps gradients and AdamW's moments in a TrainState. It holds only
// its own architecture: the wiring of tensors to roles, its forward and
// backward passes.
//
// Errors name the parameter, tensor or file concerned and carry no package
// prefix, except those of a Checkpoint, which begin with the model's name
// (Names.Model).
package nn
