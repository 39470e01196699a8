package imagenet_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/models/imagenet"
)

// encodePNG returns m as a PNG file.
func encodePNG(t *testing.T, m image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, m))
	return buf.Bytes()
}

// pngWithSize returns a PNG signature and an IHDR chunk claiming w×h RGB
// pixels, and no image data.
func pngWithSize(w, h uint32) []byte {
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2
	chunk := binary.BigEndian.AppendUint32(nil, uint32(len(ihdr)))
	chunk = append(chunk, "IHDR"...)
	chunk = append(chunk, ihdr...)
	chunk = binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(chunk[4:]))
	return append([]byte("\x89PNG\r\n\x1a\n"), chunk...)
}

func TestDecodeKinds(t *testing.T) {
	// Go's own encoder, for image types the goldens reach through PIL's
	// files: the same pixels come back.
	nrgba := image.NewNRGBA(image.Rect(0, 0, 2, 1))
	nrgba.Pix = []uint8{10, 20, 30, 0, 40, 50, 60, 128}
	got, err := imagenet.Decode(bytes.NewReader(encodePNG(t, nrgba)))
	require.NoError(t, err)
	assert.Equal(t, &imagenet.Image{W: 2, H: 1, Pix: []uint8{10, 20, 30, 40, 50, 60}}, got,
		"alpha dropped, not composited, even where it is 0")

	g16 := image.NewGray16(image.Rect(0, 0, 3, 1))
	for i, v := range []uint16{100, 255, 0xffff} {
		g16.SetGray16(i, 0, color.Gray16{Y: v})
	}
	got, err = imagenet.Decode(bytes.NewReader(encodePNG(t, g16)))
	require.NoError(t, err)
	assert.Equal(t, []uint8{100, 100, 100, 255, 255, 255, 255, 255, 255}, got.Pix, "16-bit gray clipped as PIL's mode I")

	rgba64 := image.NewRGBA64(image.Rect(0, 0, 1, 1))
	rgba64.SetRGBA64(0, 0, color.RGBA64{R: 0x12ff, G: 0x3400, B: 0xff01, A: 0xffff})
	got, err = imagenet.Decode(bytes.NewReader(encodePNG(t, rgba64)))
	require.NoError(t, err)
	assert.Equal(t, []uint8{0x12, 0x34, 0xff}, got.Pix, "16-bit RGB: high bytes")

	var buf bytes.Buffer
	gray := image.NewGray(image.Rect(0, 0, 8, 8))
	for i := range gray.Pix {
		gray.Pix[i] = 200
	}
	require.NoError(t, jpeg.Encode(&buf, gray, nil))
	got, err = imagenet.Decode(&buf)
	require.NoError(t, err)
	assert.Equal(t, 8, got.W)
	assert.InDelta(t, 200, got.Pix[0], 1, "grayscale JPEG")
	assert.Equal(t, got.Pix[0], got.Pix[2])
}

func TestLoadMatchesDecode(t *testing.T) {
	for _, name := range []string{"cat.jpg", "coffee.png", "camera.png"} {
		path := filepath.Join(imageDir, name)
		loaded, err := imagenet.Load(path)
		require.NoError(t, err)
		f, err := os.Open(path)
		require.NoError(t, err)
		decoded, err := imagenet.Decode(f)
		require.NoError(t, f.Close())
		require.NoError(t, err)
		assert.Equal(t, loaded, decoded, name)
		require.NoError(t, loaded.Check())
	}
}

func TestDecodeErrors(t *testing.T) {
	pngData, err := os.ReadFile(filepath.Join(imageDir, "coffee.png"))
	require.NoError(t, err)
	jpegData, err := os.ReadFile(filepath.Join(imageDir, "coffee.jpg"))
	require.NoError(t, err)
	var gif bytes.Buffer
	gif.WriteString("GIF89a")
	tests := []struct {
		name string
		data []byte
		want error  // nil: any error
		msg  string // part of the message
	}{
		{"empty", nil, imagenet.ErrFormat, "not a JPEG or PNG"},
		{"text", []byte("hello, world\n"), imagenet.ErrFormat, "not a JPEG or PNG"},
		{"GIF", gif.Bytes(), imagenet.ErrFormat, "not a JPEG or PNG"},
		{"PNG signature only", pngData[:8], nil, "PNG"},
		{"truncated PNG", pngData[:len(pngData)/2], nil, "PNG"},
		{"PNG without its end", pngData[:len(pngData)-12], nil, "PNG"},
		{"corrupt PNG", corrupt(pngData, 100), nil, "PNG"},
		{"JPEG SOI only", jpegData[:3], nil, "JPEG"},
		{"truncated JPEG", jpegData[:len(jpegData)/2], nil, "JPEG"},
		{"PNG too large", pngWithSize(20000, 10000), imagenet.ErrTooLarge, "20000x10000"},
		{"PNG zero width", pngWithSize(0, 10), nil, "PNG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, err := imagenet.Decode(bytes.NewReader(tt.data))
			require.Error(t, err)
			assert.Nil(t, img)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
			}
			assert.Contains(t, err.Error(), tt.msg)

			// Load names the file.
			path := filepath.Join(t.TempDir(), "photo.img")
			require.NoError(t, os.WriteFile(path, tt.data, 0o644))
			_, err = imagenet.Load(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
			}
		})
	}
}

// corrupt returns a copy of data with the byte at i inverted.
func corrupt(data []byte, i int) []byte {
	out := bytes.Clone(data)
	out[i] ^= 0xff
	return out
}

func TestLoadMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.jpg")
	_, err := imagenet.Load(path)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), path)
}

// failingReader fails on its first read.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestDecodeReadError(t *testing.T) {
	_, err := imagenet.Decode(failingReader{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk on fire")
}

func TestImageCheck(t *testing.T) {
	tests := []struct {
		name string
		img  *imagenet.Image
		want error
	}{
		{"valid", &imagenet.Image{W: 2, H: 1, Pix: make([]uint8, 6)}, nil},
		{"nil", nil, imagenet.ErrInvalid},
		{"zero size", &imagenet.Image{}, imagenet.ErrInvalid},
		{"negative", &imagenet.Image{W: -1, H: -3, Pix: make([]uint8, 9)}, imagenet.ErrInvalid},
		{"long Pix", &imagenet.Image{W: 2, H: 1, Pix: make([]uint8, 7)}, imagenet.ErrInvalid},
		{"too large", &imagenet.Image{W: 1 << 20, H: 1 << 20}, imagenet.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.img.Check()
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}

func TestNewImage(t *testing.T) {
	img, err := imagenet.NewImage(3, 2)
	require.NoError(t, err)
	require.NoError(t, img.Check())
	assert.Equal(t, make([]uint8, 18), img.Pix)
	_, err = imagenet.NewImage(0, 2)
	require.ErrorIs(t, err, imagenet.ErrInvalid)
	_, err = imagenet.NewImage(1<<16, 1<<16)
	require.ErrorIs(t, err, imagenet.ErrTooLarge)
}
