package layers

import (
	"github.com/zbench/zbench/kernels"
	"github.com/zbench/zbench/models/nn"
)

// NewScratch allocates with a the scratch of quantized linears over n rows:
// codes (I8 or E4M3) for inputs of each width in inputs, the rows' scales
// where perToken (int8 dynamic or FP8 inputs), and a product of dtype dt
// for each width in sums, the outputs a residual is added to.
func NewScratch(a *nn.Allocator, codes, dt kernels.DType, n int, inputs, sums []int, perToken bool) *Scratch {
	s := &Scratch{Codes: map[int]*kernels.Tensor{}, Sum: map[int]*kernels.Tensor{}}
	if perToken {
		s.Scale = a.Tensor(kernels.F32, n)
	}
	for _, w := range sums {
		if s.Sum[w] == nil {
			s.Sum[w] = a.Tensor(dt, n, w)
		}
	}
	for _, w := range inputs {
		if s.Codes[w] == nil {
			s.Codes[w] = a.Tensor(codes, n, w)
		}
	}
	return s
}
