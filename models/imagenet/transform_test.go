package imagenet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/imagenet"
)

// TestShorterSize checks the sizes against torchvision 0.14's
// _compute_resized_output_size((h, w), [256]).
func TestShorterSize(t *testing.T) {
	tests := []struct{ w, h, wantW, wantH int }{
		{500, 375, 341, 256},
		{375, 500, 256, 341},
		{256, 256, 256, 256},
		{300, 200, 384, 256},
		{640, 480, 341, 256},
		{4032, 3024, 341, 256},
		{1920, 1080, 455, 256},
		{1, 1000, 256, 256000},
		{1000, 1, 256000, 256},
		{7, 3, 597, 256},
		{255, 256, 256, 257},
		{257, 256, 257, 256},
		{100, 100, 256, 256},
		{333, 1000, 256, 768},
	}
	for _, tt := range tests {
		w, h := imagenet.ShorterSize(tt.w, tt.h, 256)
		assert.Equal(t, [2]int{tt.wantW, tt.wantH}, [2]int{w, h}, "%dx%d", tt.w, tt.h)
	}
}

func TestResizeShorter(t *testing.T) {
	img := randomImage(20, 10, 4)
	got, err := imagenet.ResizeShorter(img, 5)
	require.NoError(t, err)
	want, err := imagenet.Resize(img, 10, 5)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	same, err := imagenet.ResizeShorter(img, 10)
	require.NoError(t, err)
	assert.Equal(t, img, same, "short side already 10: unchanged")

	_, err = imagenet.ResizeShorter(img, 0)
	require.ErrorIs(t, err, imagenet.ErrInvalid)
	_, err = imagenet.ResizeShorter(&imagenet.Image{W: 2, H: 2}, 4)
	require.ErrorIs(t, err, imagenet.ErrInvalid)
	_, err = imagenet.ResizeShorter(randomImage(1, 100, 5), 1<<20)
	require.ErrorIs(t, err, imagenet.ErrTooLarge)
}

// coords returns a w×h image whose pixel (x, y) is (x, y, 1): the crop's
// pixels tell where they came from, and padding (0, 0, 0) shows.
func coords(w, h int) *imagenet.Image {
	img := &imagenet.Image{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	for y := range h {
		for x := range w {
			img.Pix[3*(y*w+x)], img.Pix[3*(y*w+x)+1], img.Pix[3*(y*w+x)+2] = uint8(x), uint8(y), 1
		}
	}
	return img
}

// TestCenterCropOffsets checks torchvision's offsets int(round((H − h) /
// 2.0)), halves to even.
func TestCenterCropOffsets(t *testing.T) {
	tests := []struct {
		w, h, cropW, cropH int
		left, top          int
	}{
		{10, 10, 10, 10, 0, 0},
		{11, 10, 10, 10, 0, 0}, // round(0.5) = 0
		{12, 10, 10, 10, 1, 0},
		{13, 10, 10, 10, 2, 0}, // round(1.5) = 2
		{15, 10, 10, 10, 2, 0}, // round(2.5) = 2
		{17, 10, 10, 10, 4, 0}, // round(3.5) = 4
		{10, 13, 10, 10, 0, 2},
		{10, 15, 10, 10, 0, 2},
		{200, 200, 10, 3, 95, 98}, // round(98.5) = 98
		{200, 200, 1, 1, 100, 100},
	}
	for _, tt := range tests {
		got, err := imagenet.CenterCrop(coords(tt.w, tt.h), tt.cropH, tt.cropW)
		require.NoError(t, err)
		require.Equal(t, [2]int{tt.cropW, tt.cropH}, [2]int{got.W, got.H})
		assert.Equal(t, []uint8{uint8(tt.left), uint8(tt.top), 1}, got.Pix[:3], "%dx%d to %dx%d", tt.w, tt.h, tt.cropW, tt.cropH)
		last := got.Pix[len(got.Pix)-3:]
		assert.Equal(t, []uint8{uint8(tt.left + tt.cropW - 1), uint8(tt.top + tt.cropH - 1), 1}, last)
	}
}

// TestCenterCropImageNetSizes checks the crop the transform makes of
// Resize(256)'s outputs.
func TestCenterCropImageNetSizes(t *testing.T) {
	for _, tt := range []struct{ w, h, left, top int }{
		{341, 256, 58, 16}, // round(58.5) = 58
		{256, 341, 16, 58},
		{384, 256, 80, 16},
		{455, 256, 116, 16}, // round(115.5) = 116
		{256, 256, 16, 16},
	} {
		img := randomImage(tt.w, tt.h, 6)
		got, err := imagenet.CenterCrop(img, 224, 224)
		require.NoError(t, err)
		for y := range 224 {
			src := img.Pix[3*((tt.top+y)*tt.w+tt.left):][:3*224]
			require.Equal(t, src, got.Pix[3*224*y:3*224*(y+1)], "%dx%d row %d", tt.w, tt.h, y)
		}
	}
}

// TestCenterCropPadding checks torchvision's padding of an image smaller
// than the crop: (crop − size) // 2 black pixels before, the rest after.
func TestCenterCropPadding(t *testing.T) {
	// 3x2 into 7 wide, 6 high: 2 columns left, 2 right, 2 rows above, 2
	// below.
	got, err := imagenet.CenterCrop(coords(3, 2), 6, 7)
	require.NoError(t, err)
	require.Equal(t, [2]int{7, 6}, [2]int{got.W, got.H})
	for y := range 6 {
		for x := range 7 {
			p := got.Pix[3*(y*7+x) : 3*(y*7+x)+3]
			if x >= 2 && x < 5 && y >= 2 && y < 4 {
				assert.Equal(t, []uint8{uint8(x - 2), uint8(y - 2), 1}, p, "(%d, %d)", x, y)
			} else {
				assert.Equal(t, []uint8{0, 0, 0}, p, "(%d, %d) is padding", x, y)
			}
		}
	}
	// 4 wide into 7 (1 left, 2 right), 9 high cropped to 5 (offset 2).
	got, err = imagenet.CenterCrop(coords(4, 9), 5, 7)
	require.NoError(t, err)
	assert.Equal(t, []uint8{0, 0, 0}, got.Pix[:3])
	assert.Equal(t, []uint8{0, 2, 1}, got.Pix[3:6])
	assert.Equal(t, []uint8{3, 2, 1}, got.Pix[12:15])
	assert.Equal(t, []uint8{0, 0, 0}, got.Pix[15:18])
}

func TestCenterCropErrors(t *testing.T) {
	_, err := imagenet.CenterCrop(coords(4, 4), 0, 2)
	require.ErrorIs(t, err, imagenet.ErrInvalid)
	_, err = imagenet.CenterCrop(nil, 2, 2)
	require.ErrorIs(t, err, imagenet.ErrInvalid)
	_, err = imagenet.CenterCrop(coords(4, 4), 1<<20, 1<<20)
	require.ErrorIs(t, err, imagenet.ErrTooLarge)
}

func TestNormalize(t *testing.T) {
	img := &imagenet.Image{W: 2, H: 1, Pix: []uint8{0, 128, 255, 51, 102, 153}}
	got, err := imagenet.Normalize(img, [3]float64{0.5, 0, 1}, [3]float64{0.5, 1, 2})
	require.NoError(t, err)
	// CHW: the R plane, then G, then B, each operation rounded to float32
	// (variables, not constant expressions, which Go evaluates exactly).
	v := func(x uint8) float32 { return float32(x) / 255 }
	half, one, two := float32(0.5), float32(1), float32(2)
	want := []float32{
		(v(0) - half) / half, (v(51) - half) / half,
		v(128), v(102),
		(v(255) - one) / two, (v(153) - one) / two,
	}
	assert.Equal(t, want, got)

	_, err = imagenet.Normalize(img, imagenet.Mean, [3]float64{1, 1e-50, 1})
	require.ErrorIs(t, err, imagenet.ErrInvalid, "std zero in float32")
	_, err = imagenet.Normalize(&imagenet.Image{W: 1, H: 1}, imagenet.Mean, imagenet.Std)
	require.ErrorIs(t, err, imagenet.ErrInvalid)
}

func TestPreprocess(t *testing.T) {
	for _, size := range [][2]int{{1, 1}, {10, 300}, {500, 375}} {
		img := randomImage(size[0], size[1], 7)
		got, err := imagenet.Preprocess(img)
		require.NoError(t, err)
		require.Len(t, got, 3*224*224)
		// The same as the steps one by one.
		resized, err := imagenet.ResizeShorter(img, 256)
		require.NoError(t, err)
		cropped, err := imagenet.CenterCrop(resized, 224, 224)
		require.NoError(t, err)
		want, err := imagenet.Normalize(cropped, imagenet.Mean, imagenet.Std)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := imagenet.Preprocess(&imagenet.Image{W: 3, H: 3, Pix: make([]uint8, 3)})
	require.ErrorIs(t, err, imagenet.ErrInvalid)
}
