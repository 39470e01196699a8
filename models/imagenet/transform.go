package imagenet

import "fmt"

// The ImageNet evaluation transform's sizes: torchvision's Resize(256) and
// CenterCrop(224).
const (
	// ResizeSize is the short side Resize(256) gives an image.
	ResizeSize = 256
	// CropSize is the side of the square CenterCrop(224) cuts out.
	CropSize = 224
)

// The ImageNet statistics of torchvision's Normalize(Mean, Std), per channel
// (R, G, B), as the float64 values torchvision is given (Normalize rounds
// them to float32).
var (
	// Mean is the mean Normalize subtracts.
	Mean = [3]float64{0.485, 0.456, 0.406}
	// Std is the standard deviation Normalize divides by.
	Std = [3]float64{0.229, 0.224, 0.225}
)

// ShorterSize returns the size torchvision's Resize(size) (0.14's
// _compute_resized_output_size, without max_size) gives a w×h image: the
// short side becomes size and the long side int(size * long / short), the
// quotient in float64 and truncated. w, h and size must be positive (and
// size·max(w, h) below 2⁵³, as ResizeShorter checks).
func ShorterSize(w, h, size int) (newW, newH int) {
	short, long := w, h
	if w > h {
		short, long = h, w
	}
	newLong := int(float64(size*long) / float64(short))
	if w <= h {
		return size, newLong
	}
	return newLong, size
}

// ResizeShorter returns img resized as torchvision's Resize(size) resizes a
// PIL image: to ShorterSize with Resize (PIL's bilinear filter), or an
// unchanged copy when that is the image's own size. Errors wrap ErrInvalid
// or ErrTooLarge.
func ResizeShorter(img *Image, size int) (*Image, error) {
	if err := img.Check(); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, fmt.Errorf("imagenet: resize to short side %d: %w", size, ErrInvalid)
	}
	if int64(size)*int64(max(img.W, img.H)) > 1<<53 {
		return nil, fmt.Errorf("imagenet: resize %dx%d to short side %d: %w", img.W, img.H, size, ErrTooLarge)
	}
	w, h := ShorterSize(img.W, img.H, size)
	return Resize(img, w, h)
}

// CenterCrop returns the h×w centre of img as torchvision's CenterCrop((h,
// w)) crops a PIL image. The crop starts at row int(round((H − h) / 2.0))
// and column int(round((W − w) / 2.0)), Python's round taking halves to
// even. An image smaller than the crop is first padded with black, as
// torchvision pads it: (w − W) // 2 columns on the left and (w − W + 1) // 2
// on the right, rows likewise (top, then bottom), so the result is always
// h×w. Errors wrap ErrInvalid or ErrTooLarge.
func CenterCrop(img *Image, h, w int) (*Image, error) {
	if err := img.Check(); err != nil {
		return nil, err
	}
	if err := checkSize(w, h); err != nil {
		return nil, fmt.Errorf("imagenet: center crop %dx%d to %dx%d: %w", img.W, img.H, w, h, err)
	}
	// Padding, as torchvision's pad before its crop.
	padL, padT := max(w-img.W, 0)/2, max(h-img.H, 0)/2
	paddedW, paddedH := max(img.W, w), max(img.H, h)
	top := padT - roundHalfEven(paddedH-h)
	left := padL - roundHalfEven(paddedW-w)
	// top and left are where the source's first row and column land in the
	// crop: rows of the crop outside 0..img.H-top-1 are padding.
	out := &Image{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	x0, x1 := max(left, 0), min(left+img.W, w)
	for y := range h {
		sy := y - top
		if sy < 0 || sy >= img.H || x0 >= x1 {
			continue
		}
		src := img.Pix[3*(sy*img.W+x0-left) : 3*(sy*img.W+x1-left)]
		copy(out.Pix[3*(y*w+x0):], src)
	}
	return out, nil
}

// roundHalfEven returns Python's int(round(d / 2.0)) for d >= 0: d/2, a
// half going to the even neighbour.
func roundHalfEven(d int) int {
	q := d / 2
	if d%2 == 1 && q%2 == 1 {
		q++
	}
	return q
}

// Normalize returns torchvision's Normalize(mean, std)(ToTensor()(img)): a
// [3, H, W] float32 tensor, channel-major (CHW), each value
// (float32(v)/255 − float32(mean[c])) / float32(std[c]) computed in float32
// in that order, as torch computes it.
func Normalize(img *Image, mean, std [3]float64) ([]float32, error) {
	if err := img.Check(); err != nil {
		return nil, err
	}
	for c := range 3 {
		if float32(std[c]) == 0 {
			return nil, fmt.Errorf("imagenet: normalize: std[%d] = %g is zero in float32: %w", c, std[c], ErrInvalid)
		}
	}
	n := img.W * img.H
	out := make([]float32, 3*n)
	for c := range 3 {
		// One value per byte: the same float32 operations, done once.
		var table [256]float32
		m, s := float32(mean[c]), float32(std[c])
		for v := range table {
			x := float32(v) / 255
			table[v] = (x - m) / s
		}
		plane := out[c*n : (c+1)*n]
		for i := range plane {
			plane[i] = table[img.Pix[3*i+c]]
		}
	}
	return out, nil
}

// Preprocess returns the ImageNet evaluation transform of img, torchvision's
// Resize(256), CenterCrop(224), ToTensor() and Normalize(Mean, Std): a [3,
// 224, 224] float32 tensor, channel-major. Errors wrap ErrInvalid.
func Preprocess(img *Image) ([]float32, error) {
	resized, err := ResizeShorter(img, ResizeSize)
	if err != nil {
		return nil, err
	}
	cropped, err := CenterCrop(resized, CropSize, CropSize)
	if err != nil {
		return nil, err
	}
	return Normalize(cropped, Mean, Std)
}
