package imagenet

import "image"

// libjpeg-turbo's YCbCr-to-RGB tables (jdcolor.c's build_ycc_rgb_table):
// 16-bit fixed point, the red and blue terms rounded, the green terms summed
// and then shifted, with ONE_HALF folded into cbG.
var crR, cbB [256]int32
var crG, cbG [256]int64

func init() {
	const scaleBits = 16
	const oneHalf = int64(1) << (scaleBits - 1)
	fix := func(x float64) int64 { return int64(x*(1<<scaleBits) + 0.5) }
	// Variables, so that fix rounds in float64 as C's FIX macro does.
	kCrR, kCbB, kCrG, kCbG := 1.40200, 1.77200, 0.71414, 0.34414
	for i := range 256 {
		x := int64(i - 128)
		crR[i] = int32((fix(kCrR)*x + oneHalf) >> scaleBits)
		cbB[i] = int32((fix(kCbB)*x + oneHalf) >> scaleBits)
		crG[i] = -fix(kCrG) * x
		cbG[i] = -fix(kCbG)*x + oneHalf
	}
}

// clamp8 limits v to 0..255.
func clamp8(v int32) uint8 {
	return uint8(min(max(v, 0), 255))
}

// ycbcrToRGB converts a JPEG's YCbCr image (Go's decoder output, which holds
// the chroma planes at their stored resolution) to RGB as libjpeg-turbo
// does by default: chroma upsampled by jdsample.c's "fancy" triangle filter
// (h2v1, h1v2 and h2v2: 3/4 of the nearer sample and 1/4 of the further one
// with its exact rounding, edges replicated; plain replication for 4:1:1
// and 4:1:0, and for 4:2:2 and 4:2:0 when the chroma is 2 samples wide or
// less), then jdcolor.c's fixed-point conversion.
func ycbcrToRGB(out *Image, m *image.YCbCr) {
	w, h := out.W, out.H
	hs, vs := 1, 1
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio422:
		hs = 2
	case image.YCbCrSubsampleRatio420:
		hs, vs = 2, 2
	case image.YCbCrSubsampleRatio440:
		vs = 2
	case image.YCbCrSubsampleRatio411:
		hs = 4
	case image.YCbCrSubsampleRatio410:
		hs, vs = 4, 2
	}
	// Go's decoder returns images at the origin, chroma sample (cx, cy) at
	// Cb[cy*CStride+cx]; the chroma planes are ⌈w/hs⌉×⌈h/vs⌉ (jpeg's
	// downsampled_width and downsampled_height).
	cw, ch := (w+hs-1)/hs, (h+vs-1)/vs
	yOff := m.YOffset(m.Rect.Min.X, m.Rect.Min.Y)
	cOff := m.COffset(m.Rect.Min.X, m.Rect.Min.Y)
	cb := upsample(m.Cb[cOff:], m.CStride, cw, ch, w, h, hs, vs)
	cr := upsample(m.Cr[cOff:], m.CStride, cw, ch, w, h, hs, vs)
	for y := range h {
		yr := m.Y[yOff+y*m.YStride:]
		cbr, crr := cb[y*w:(y+1)*w], cr[y*w:(y+1)*w]
		dst := out.Pix[3*w*y : 3*w*(y+1)]
		for x := range w {
			yy := int32(yr[x])
			u, v := cbr[x], crr[x]
			dst[3*x] = clamp8(yy + crR[v])
			dst[3*x+1] = clamp8(yy + int32((cbG[u]+crG[v])>>16))
			dst[3*x+2] = clamp8(yy + cbB[u])
		}
	}
}

// upsample returns the w×h plane, row-major, that libjpeg-turbo makes of the
// cw×ch chroma plane in (rows stride bytes apart) subsampled by hs
// horizontally and vs vertically.
func upsample(in []uint8, stride, cw, ch, w, h, hs, vs int) []uint8 {
	out := make([]uint8, w*h)
	row := func(cy int) []uint8 {
		cy = min(max(cy, 0), ch-1)
		return in[cy*stride : cy*stride+cw]
	}
	fancy := (hs == 2 && (vs == 1 || vs == 2) && cw > 2) || (hs == 1 && vs == 2)
	if !fancy {
		for y := range h {
			src, dst := row(y/vs), out[y*w:(y+1)*w]
			for x := range w {
				dst[x] = src[x/hs]
			}
		}
		return out
	}
	switch {
	case hs == 2 && vs == 1: // h2v1_fancy_upsample
		for y := range h {
			src, dst := row(y), out[y*w:(y+1)*w]
			for x := range w {
				c := x / 2
				s := 3 * int(src[c])
				if x%2 == 0 {
					dst[x] = uint8((s + int(src[max(c-1, 0)]) + 1) >> 2)
				} else {
					dst[x] = uint8((s + int(src[min(c+1, cw-1)]) + 2) >> 2)
				}
			}
		}
	case hs == 1: // h1v2_fancy_upsample
		for y := range h {
			near, bias := row(y/2), 1
			far := row(y/2 - 1)
			if y%2 == 1 {
				far, bias = row(y/2+1), 2
			}
			dst := out[y*w : (y+1)*w]
			for x := range w {
				dst[x] = uint8((3*int(near[x]) + int(far[x]) + bias) >> 2)
			}
		}
	default: // h2v2_fancy_upsample
		sum := make([]int, cw)
		for y := range h {
			near, far := row(y/2), row(y/2-1)
			if y%2 == 1 {
				far = row(y/2 + 1)
			}
			for c := range sum {
				sum[c] = 3*int(near[c]) + int(far[c])
			}
			dst := out[y*w : (y+1)*w]
			for x := range w {
				c := x / 2
				if x%2 == 0 {
					dst[x] = uint8((3*sum[c] + sum[max(c-1, 0)] + 8) >> 4)
				} else {
					dst[x] = uint8((3*sum[c] + sum[min(c+1, cw-1)] + 7) >> 4)
				}
			}
		}
	}
	return out
}
