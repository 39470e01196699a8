package imagenet_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/imagenet"
)

// gray returns a w×h image whose pixels have R = G = B = v[y*w+x].
func gray(w, h int, v ...uint8) *imagenet.Image {
	img := &imagenet.Image{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	for i, p := range v {
		img.Pix[3*i], img.Pix[3*i+1], img.Pix[3*i+2] = p, p, p
	}
	return img
}

// randomImage returns a w×h image of seeded random pixels.
func randomImage(w, h int, seed uint64) *imagenet.Image {
	r := rand.New(rand.NewPCG(seed, 1))
	img := &imagenet.Image{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	for i := range img.Pix {
		img.Pix[i] = uint8(r.UintN(256))
	}
	return img
}

// reds returns the R channel of img.
func reds(img *imagenet.Image) []uint8 {
	out := make([]uint8, img.W*img.H)
	for i := range out {
		out[i] = img.Pix[3*i]
	}
	return out
}

func TestResizeByHand(t *testing.T) {
	tests := []struct {
		name string
		in   *imagenet.Image
		w, h int
		want []uint8
	}{{
		// Scale 2: support 2, weights 1/8 3/8 3/8 1/8, renormalised where
		// the window leaves the image (3/7 3/7 1/7 at the left edge).
		name: "2x down",
		in:   gray(8, 1, 10, 20, 30, 40, 50, 60, 70, 80),
		w:    4, h: 1,
		want: []uint8{17, 35, 55, 73}, // 120/7, 280/8, 440/8, 510/7
	}, {
		name: "2x down vertical",
		in:   gray(1, 8, 10, 20, 30, 40, 50, 60, 70, 80),
		w:    1, h: 4,
		want: []uint8{17, 35, 55, 73},
	}, {
		// Scale 1/2: support 1, outputs at 0.25, 0.75, 1.25, 1.75; the
		// edge windows hold one pixel.
		name: "2x up",
		in:   gray(2, 1, 0, 200),
		w:    4, h: 1,
		want: []uint8{0, 50, 150, 200},
	}, {
		name: "2x up both",
		in:   gray(2, 2, 0, 200, 200, 0),
		w:    4, h: 4,
		want: []uint8{
			0, 50, 150, 200,
			50, 75, 125, 150, // 3/4 of row 0 and 1/4 of row 1
			150, 125, 75, 50,
			200, 150, 50, 0,
		},
	}, {
		name: "1x1 up",
		in:   gray(1, 1, 77),
		w:    5, h: 3,
		want: []uint8{77, 77, 77, 77, 77, 77, 77, 77, 77, 77, 77, 77, 77, 77, 77},
	}, {
		// A reduction to one pixel: the triangle of support 3 centred at
		// 1.5, weights 1 − |x + 0.5 − 1.5|/3 = 2/3, 1, 2/3, normalised.
		name: "3 to 1",
		in:   gray(3, 1, 30, 60, 90),
		w:    1, h: 1,
		want: []uint8{60},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := imagenet.Resize(tt.in, tt.w, tt.h)
			require.NoError(t, err)
			require.Equal(t, [2]int{tt.w, tt.h}, [2]int{got.W, got.H})
			assert.Equal(t, tt.want, reds(got))
			assert.Equal(t, reds(got), greens(got), "channels resized alike")
		})
	}
}

// greens returns the G channel of img.
func greens(img *imagenet.Image) []uint8 {
	out := make([]uint8, img.W*img.H)
	for i := range out {
		out[i] = img.Pix[3*i+1]
	}
	return out
}

func TestResizeIdentity(t *testing.T) {
	img := randomImage(13, 7, 1)
	got, err := imagenet.Resize(img, 13, 7)
	require.NoError(t, err)
	require.Equal(t, img, got)
	got.Pix[0]++
	assert.NotEqual(t, img.Pix[0], got.Pix[0], "a copy, not the input")
}

// TestResizeConstant checks that every resize keeps a constant image
// constant: the coefficients of each output sum to one.
func TestResizeConstant(t *testing.T) {
	sizes := [][2]int{{1, 1}, {1, 7}, {7, 1}, {2, 3}, {13, 11}, {100, 3}, {3, 100}, {257, 5}}
	for _, in := range sizes {
		for _, out := range sizes {
			img := gray(in[0], in[1])
			for i := range img.Pix {
				img.Pix[i] = 201
			}
			got, err := imagenet.Resize(img, out[0], out[1])
			require.NoError(t, err)
			for i, v := range got.Pix {
				require.Equal(t, uint8(201), v, "%v to %v: byte %d", in, out, i)
			}
		}
	}
}

// TestResizeOnePass checks that a resize of one dimension treats the rows
// (or columns) independently: Pillow runs only that dimension's pass.
func TestResizeOnePass(t *testing.T) {
	img := randomImage(11, 6, 2)
	wide, err := imagenet.Resize(img, 17, 6)
	require.NoError(t, err)
	for y := range img.H {
		row := &imagenet.Image{W: 11, H: 1, Pix: img.Pix[3*11*y : 3*11*(y+1)]}
		got, err := imagenet.Resize(row, 17, 1)
		require.NoError(t, err)
		assert.Equal(t, got.Pix, wide.Pix[3*17*y:3*17*(y+1)], "row %d", y)
	}
	tall, err := imagenet.Resize(img, 11, 3)
	require.NoError(t, err)
	for x := range img.W {
		col := &imagenet.Image{W: 1, H: img.H, Pix: make([]uint8, 3*img.H)}
		for y := range img.H {
			copy(col.Pix[3*y:3*y+3], img.Pix[3*(y*img.W+x):])
		}
		got, err := imagenet.Resize(col, 1, 3)
		require.NoError(t, err)
		for y := range 3 {
			assert.Equal(t, got.Pix[3*y:3*y+3], tall.Pix[3*(y*11+x):3*(y*11+x)+3], "column %d row %d", x, y)
		}
	}
}

func TestResizeErrors(t *testing.T) {
	valid := randomImage(4, 3, 3)
	tests := []struct {
		name string
		img  *imagenet.Image
		w, h int
		want error
	}{
		{"nil image", nil, 2, 2, imagenet.ErrInvalid},
		{"short Pix", &imagenet.Image{W: 4, H: 3, Pix: make([]uint8, 35)}, 2, 2, imagenet.ErrInvalid},
		{"empty image", &imagenet.Image{}, 2, 2, imagenet.ErrInvalid},
		{"zero width", valid, 0, 2, imagenet.ErrInvalid},
		{"negative height", valid, 2, -1, imagenet.ErrInvalid},
		{"too large", valid, 1 << 20, 1 << 20, imagenet.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := imagenet.Resize(tt.img, tt.w, tt.h)
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, got)
		})
	}
}
