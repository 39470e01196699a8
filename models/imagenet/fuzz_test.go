package imagenet

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzMaxPixels bounds the images FuzzDecode decodes, so that a header
// claiming a huge image is refused instead of allocated.
const fuzzMaxPixels = 1 << 16

// FuzzDecode checks that decoding arbitrary bytes never panics, refuses
// what is neither JPEG nor PNG with ErrFormat, and returns only valid
// images.
func FuzzDecode(f *testing.F) {
	dir := "../../testdata/golden/imagenet"
	seeds, err := filepath.Glob(filepath.Join(dir, "decode", "*"))
	require.NoError(f, err)
	seeds = append(seeds, filepath.Join(dir, "coffee.jpg"))
	for _, path := range seeds {
		data, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte(nil))
	f.Add([]byte(jpegSignature))
	f.Add([]byte(pngSignature))
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := decode(data, fuzzMaxPixels)
		known := bytes.HasPrefix(data, []byte(pngSignature)) || bytes.HasPrefix(data, []byte(jpegSignature))
		require.Equal(t, !known, errors.Is(err, ErrFormat), "ErrFormat exactly when the signature is unknown: %v", err)
		if err != nil {
			require.Nil(t, img)
			return
		}
		require.NoError(t, img.Check())
		require.LessOrEqual(t, img.W*img.H, fuzzMaxPixels)
	})
}

// FuzzParseLabels checks that ParseLabels never panics and that what it
// accepts is the file's lines, trimmed, with blank lines only at the end.
func FuzzParseLabels(f *testing.F) {
	for _, s := range []string{
		"tench, Tinca tinca\ngoldfish\n", "a\r\nb", "a\n\nb", "", "\n", "a\n\n\n", " x \n\t\n", "\xff\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		labels, err := ParseLabels(bytes.NewReader(data))
		if err != nil {
			require.ErrorIs(t, err, ErrLabels)
			require.Nil(t, labels)
			return
		}
		require.NotEmpty(t, labels)
		lines := strings.Split(string(data), "\n")
		for i := range lines {
			lines[i] = strings.TrimSpace(lines[i])
		}
		for len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		require.Equal(t, lines, labels)
		for _, l := range labels {
			require.NotEmpty(t, l)
			require.NotContains(t, l, "\n")
		}
	})
}

// FuzzResize checks that Resize never panics, returns the size asked for,
// keeps every value within its channel's input range (the bilinear
// weights are positive and sum to one), and keeps a constant image
// constant; CenterCrop of the result likewise returns its size.
func FuzzResize(f *testing.F) {
	f.Add(uint8(13), uint8(11), uint8(5), uint8(11), uint64(1), false)
	f.Add(uint8(1), uint8(1), uint8(200), uint8(3), uint64(2), true)
	f.Add(uint8(255), uint8(2), uint8(1), uint8(1), uint64(3), false)
	f.Add(uint8(7), uint8(90), uint8(64), uint8(9), uint64(4), false)
	f.Fuzz(func(t *testing.T, w, h, ow, oh uint8, seed uint64, constant bool) {
		iw, ih, tw, th := int(w)+1, int(h)+1, int(ow)+1, int(oh)+1
		r := rand.New(rand.NewPCG(seed, 2))
		img := &Image{W: iw, H: ih, Pix: make([]uint8, 3*iw*ih)}
		for i := range img.Pix {
			img.Pix[i] = uint8(r.UintN(256))
			if constant {
				img.Pix[i] = uint8(seed)
			}
		}
		got, err := Resize(img, tw, th)
		require.NoError(t, err)
		require.Equal(t, [2]int{tw, th}, [2]int{got.W, got.H})
		require.NoError(t, got.Check())
		for c := range 3 {
			lo, hi := uint8(255), uint8(0)
			for i := c; i < len(img.Pix); i += 3 {
				lo, hi = min(lo, img.Pix[i]), max(hi, img.Pix[i])
			}
			for i := c; i < len(got.Pix); i += 3 {
				require.True(t, got.Pix[i] >= lo && got.Pix[i] <= hi, "channel %d: %d outside [%d, %d]", c, got.Pix[i], lo, hi)
			}
		}
		if constant {
			require.True(t, !slices.ContainsFunc(got.Pix, func(v uint8) bool { return v != uint8(seed) }), "a constant image stays constant")
		}
		crop, err := CenterCrop(got, th/2+1, tw+3)
		require.NoError(t, err)
		require.Equal(t, [2]int{tw + 3, th/2 + 1}, [2]int{crop.W, crop.H})
	})
}
