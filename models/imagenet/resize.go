package imagenet

import (
	"fmt"
	"math"
)

// precisionBits is the number of fraction bits of Pillow's fixed-point
// filter coefficients (Resample.c's PRECISION_BITS: 32 − 8 − 2).
const precisionBits = 32 - 8 - 2

// Resize returns img resized to w×h pixels exactly as Pillow's
// Image.resize((w, h), Image.BILINEAR) resizes an RGB image (Pillow's
// libImaging/Resample.c): a triangle filter whose support is scaled by the
// reduction factor when downscaling (so it antialiases), its coefficients
// computed in float64, normalised to sum to one and rounded to 22-bit fixed
// point; a horizontal pass then a vertical pass, each rounding and clipping
// to 8 bits, a pass skipped when its dimension is unchanged. Errors wrap
// ErrInvalid (a bad image, a size that is not positive) or ErrTooLarge.
func Resize(img *Image, w, h int) (*Image, error) {
	if err := img.Check(); err != nil {
		return nil, err
	}
	if err := checkSize(w, h); err != nil {
		return nil, fmt.Errorf("imagenet: resize %dx%d to %dx%d: %w", img.W, img.H, w, h, err)
	}
	if w == img.W && h == img.H {
		return img.Clone(), nil
	}
	horiz := newCoeffs(img.W, w)
	vert := newCoeffs(img.H, h)
	src := img
	if w != img.W {
		// Only the input rows the vertical pass reads.
		first := vert.bounds[0]
		last := vert.bounds[2*(h-1)] + vert.bounds[2*(h-1)+1]
		src = resizeHorizontal(img, horiz, first, last)
		for i := range h {
			vert.bounds[2*i] -= first
		}
	}
	if h != img.H {
		src = resizeVertical(src, vert)
	}
	return src, nil
}

// coeffs are one pass's filter: for output pixel i, count = bounds[2i+1]
// input pixels from bounds[2i] on, weighted by k[i*size:][:count].
type coeffs struct {
	size   int
	bounds []int
	k      []int32
}

// bilinear is Pillow's bilinear (triangle) filter, of support 1.
func bilinear(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

// newCoeffs computes the filter that resamples inSize pixels to outSize as
// Resample.c's precompute_coeffs and normalize_coeffs_8bpc do for the box
// (0, inSize): the same float64 operations in the same order, so the same
// coefficients.
func newCoeffs(inSize, outSize int) coeffs {
	// Pillow holds the box in float32.
	scale := float64(float32(inSize)) / float64(outSize)
	filterscale := max(scale, 1)
	support := 1 * filterscale
	size := int(math.Ceil(support))*2 + 1
	c := coeffs{size: size, bounds: make([]int, 2*outSize), k: make([]int32, outSize*size)}
	w := make([]float64, size)
	for xx := range outSize {
		// The explicit conversions keep each product rounded on its own, as
		// in C, on platforms that fuse multiply-adds.
		center := float64((float64(xx) + 0.5) * scale)
		ss := 1 / filterscale
		xmin := max(int(center-support+0.5), 0)
		xmax := min(int(center+support+0.5), inSize) - xmin
		ww := 0.0
		for x := range xmax {
			w[x] = bilinear((float64(x+xmin) - center + 0.5) * ss)
			ww += w[x]
		}
		k := c.k[xx*size : (xx+1)*size]
		for x := range xmax {
			v := w[x]
			if ww != 0 {
				v /= ww
			}
			if v < 0 {
				k[x] = int32(-0.5 + float64(v*(1<<precisionBits)))
			} else {
				k[x] = int32(0.5 + float64(v*(1<<precisionBits)))
			}
		}
		c.bounds[2*xx] = xmin
		c.bounds[2*xx+1] = xmax
	}
	return c
}

// clip8 is Resample.c's clip8: the fixed-point sum shifted to an integer
// and clipped to 0..255.
func clip8(ss int32) uint8 {
	return uint8(min(max(ss>>precisionBits, 0), 255))
}

// resizeHorizontal resamples rows first..last-1 of img to len(c.bounds)/2
// columns.
func resizeHorizontal(img *Image, c coeffs, first, last int) *Image {
	w := len(c.bounds) / 2
	out := &Image{W: w, H: last - first, Pix: make([]uint8, 3*w*(last-first))}
	for y := range out.H {
		src := img.Pix[3*img.W*(first+y) : 3*img.W*(first+y+1)]
		dst := out.Pix[3*w*y : 3*w*(y+1)]
		for xx := range w {
			xmin, n := c.bounds[2*xx], c.bounds[2*xx+1]
			k := c.k[xx*c.size : xx*c.size+n]
			in := src[3*xmin : 3*(xmin+n)]
			ss0, ss1, ss2 := int32(1)<<(precisionBits-1), int32(1)<<(precisionBits-1), int32(1)<<(precisionBits-1)
			for x, kx := range k {
				ss0 += int32(in[3*x]) * kx
				ss1 += int32(in[3*x+1]) * kx
				ss2 += int32(in[3*x+2]) * kx
			}
			dst[3*xx], dst[3*xx+1], dst[3*xx+2] = clip8(ss0), clip8(ss1), clip8(ss2)
		}
	}
	return out
}

// resizeVertical resamples the rows of img to len(c.bounds)/2 rows.
func resizeVertical(img *Image, c coeffs) *Image {
	h := len(c.bounds) / 2
	rowLen := 3 * img.W
	out := &Image{W: img.W, H: h, Pix: make([]uint8, rowLen*h)}
	acc := make([]int32, rowLen)
	for yy := range h {
		ymin, n := c.bounds[2*yy], c.bounds[2*yy+1]
		k := c.k[yy*c.size : yy*c.size+n]
		for i := range acc {
			acc[i] = 1 << (precisionBits - 1)
		}
		for y, ky := range k {
			src := img.Pix[rowLen*(ymin+y) : rowLen*(ymin+y+1)]
			for i, v := range src {
				acc[i] += int32(v) * ky
			}
		}
		dst := out.Pix[rowLen*yy : rowLen*(yy+1)]
		for i, s := range acc {
			dst[i] = clip8(s)
		}
	}
	return out
}
