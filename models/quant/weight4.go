package quant

import (
	"fmt"
	"math"

	"github.com/zbench/zbench/kernels"
)

// QuantizeWeightOnly quantizes the float matrix w [n, k] (nn.Linear's [out,
// in]) for weight-only use (kernels.WeightQuant) in format f, returning
// the data and scales of a kernels.QWeight:
//
//   - WInt8: codes [n, k] = kernels.QuantizeValue(w, Scale(row amax)),
//     scales [n]; group is ignored;
//   - WInt4: per group of group values along k, scale = amax/7 (1 for a
//     group of zeros) and code = clamp(round(w/scale), −8, 7), ties to
//     even, stored as code+8;
//   - WNF4: per group, scale = amax (1 for zeros) and the code of the
//     NF4 level nearest w/scale (the lower one on a tie), as
//     bitsandbytes' quantize_4bit.
//
// 4-bit codes are packed two per byte, element 2j in the low nibble. k
// must be a multiple of group (itself a positive multiple of 32) for the
// 4-bit formats; a NaN or infinity is an error naming its place.
func QuantizeWeightOnly(f kernels.WeightFormat, w []float32, n, k, group int) (data []int8, scales []float32, err error) {
	if n <= 0 || k <= 0 || len(w) != n*k {
		return nil, nil, fmt.Errorf("quant: QuantizeWeightOnly: %d values for [%d, %d]: %w", len(w), n, k, kernels.ErrShape)
	}
	for i, v := range w {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, nil, fmt.Errorf("quant: QuantizeWeightOnly: w[%d, %d] is %v: %w", i/k, i%k, v, kernels.ErrValue)
		}
	}
	switch f {
	case kernels.WInt8:
		q, s, err := QuantizePerChannel(w, n, k)
		return q, s, err
	case kernels.WInt4, kernels.WNF4:
	default:
		return nil, nil, fmt.Errorf("quant: QuantizeWeightOnly: unknown format %v: %w", f, kernels.ErrValue)
	}
	if group <= 0 || group%32 != 0 || k%group != 0 {
		return nil, nil, fmt.Errorf("quant: QuantizeWeightOnly: group %d for k = %d: want a positive multiple of 32 dividing k: %w", group, k, kernels.ErrShape)
	}
	data = make([]int8, n*k/2)
	scales = make([]float32, n*k/group)
	for g := range scales {
		vals := w[g*group : (g+1)*group]
		var amax float32
		for _, v := range vals {
			amax = max(amax, abs32(v))
		}
		s := amax
		if f == kernels.WInt4 {
			s = amax / 7
		}
		if amax == 0 {
			s = 1
		}
		scales[g] = s
		for i, v := range vals {
			var code uint8
			if f == kernels.WInt4 {
				code = uint8(max(-8, min(7, math.RoundToEven(float64(v/s)))) + 8)
			} else {
				code = nearestNF4(v / s)
			}
			p := g*group + i
			if p%2 == 0 {
				data[p/2] = int8(uint8(data[p/2])&0xf0 | code)
			} else {
				data[p/2] = int8(uint8(data[p/2])&0x0f | code<<4)
			}
		}
	}
	return data, scales, nil
}

// nearestNF4 is the index of the NF4 level nearest v, the lower on a tie.
func nearestNF4(v float32) uint8 {
	best := uint8(0)
	for i, l := range kernels.NF4Levels {
		if abs32(v-l) < abs32(v-kernels.NF4Levels[best]) {
			best = uint8(i)
		}
	}
	return best
}

// DequantizeWeightOnly is the inverse of QuantizeWeightOnly: the float
// matrix [n, k] its data and scales stand for (kernels.WeightQuant's
// W[n, k] = level(code)·scale), for reports of the weight's error.
func DequantizeWeightOnly(f kernels.WeightFormat, data []int8, scales []float32, n, k, group int) ([]float32, error) {
	out := make([]float32, n*k)
	if f == kernels.WInt8 {
		return out, Dequantize(out, data, scales)
	}
	if group <= 0 || k%group != 0 || len(data) != n*k/2 || len(scales) != n*k/group {
		return nil, fmt.Errorf("quant: DequantizeWeightOnly: %d bytes and %d scales for [%d, %d] in groups of %d: %w",
			len(data), len(scales), n, k, group, kernels.ErrShape)
	}
	levels := f.Levels()
	for p := range out {
		b := uint8(data[p/2])
		code := b & 15
		if p%2 == 1 {
			code = b >> 4
		}
		out[p] = levels[code] * scales[p/group]
	}
	return out, nil
}
