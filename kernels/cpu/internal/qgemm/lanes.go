package qgemm

// DotQ4L, the lane-ordered 4-bit dot product, takes one 64-byte load of
// codes per step and widens each code in the 32-bit lane that holds it,
// with a shift and a 16-entry permute, instead of expanding 16 bytes to 16
// lanes and splitting their nibbles. Lane i of the load holds codes
// 8i…8i+7, so the step's vector j holds code 8i+j in lane i: x is
// reordered once per product to meet them (LaneOrder4), and a row's scales
// reach the lanes through a permute (ScaleWalk).

// Chunk4 is the codes of one step of DotQ4L.
const Chunk4 = 128

// LaneOrder4 reorders x in place, chunk of 128 by chunk of 128 (a shorter
// tail stays as it is), so that value 16j + i of a chunk is the one of
// position 8i + j: the order DotQ4L meets the codes in.
func LaneOrder4(x []float32) {
	var t [Chunk4]float32
	for c := 0; c+Chunk4 <= len(x); c += Chunk4 {
		v := x[c : c+Chunk4]
		for i := range 16 {
			for j := range 8 {
				t[16*j+i] = v[8*i+j]
			}
		}
		copy(v, t[:])
	}
}

// ScaleWalk is how DotQ4L meets a row's scales: each step reads N scales
// from P (1, 2 or 4: the groups its codes span), lane i taking scale
// Idx[i], and moves P on by N scales every Per steps (the steps a group
// spans, 1 when a step spans several).
type ScaleWalk struct {
	P   *float32
	N   int
	Per int
	Idx [16]int32
}

// NewScaleWalk returns the walk over a row's scales, one per group values
// along K, for DotQ4L, or false where a group neither divides nor is a
// multiple of Chunk4 (the lanes of one step would need scales apart from
// their neighbours').
func NewScaleWalk(scales []float32, group int) (ScaleWalk, bool) {
	w := ScaleWalk{P: &scales[0], N: 1, Per: 1}
	switch {
	case group > 0 && group%Chunk4 == 0:
		w.Per = group / Chunk4
	case group > 0 && Chunk4%group == 0:
		w.N = Chunk4 / group
	default:
		return w, false
	}
	// Lane i holds codes 8i…8i+7, in group 8i/group.
	for i := range w.Idx {
		w.Idx[i] = int32(i * w.N / 16)
	}
	return w, true
}
