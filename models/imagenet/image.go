// Package imagenet holds torchvision's ImageNet evaluation preprocessing,
// exact against torchvision on PIL images, and the class labels and top-k
// helpers of an image classifier's output.
//
// The evaluation transform of torchvision's ImageNet classifiers is
//
//	img = PIL.Image.open(path).convert("RGB")
//	T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
//	           T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])(img)
//
// and [Preprocess] computes it: [Decode] and [Load] read JPEG and PNG files
// into 8-bit RGB as PIL's convert("RGB") does, [Resize] is Pillow's
// Image.resize with the BILINEAR filter, [ResizeShorter] torchvision's
// Resize(size), [CenterCrop] its CenterCrop and [Normalize] ToTensor followed
// by Normalize, in float32.
//
// PNG files decode exactly as PIL decodes them, so the whole transform of a
// PNG is bit-exact. JPEG files are decoded by Go's image/jpeg, whose inverse
// DCT differs from libjpeg's in the last bit of some samples; the chroma
// upsampling and YCbCr-to-RGB conversion that follow are libjpeg-turbo's
// (the "fancy" triangle upsampling PIL gets by default), so a JPEG's pixels
// differ from PIL's by at most 3 levels, and on photographs are 97% equal
// (the package tests measure this). Neither PIL nor torchvision applies a
// JPEG's EXIF orientation, and neither does this package.
package imagenet

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"os"
)

// Image is an 8-bit RGB image: W×H pixels, row-major, 3 bytes (R, G, B) per
// pixel, len(Pix) == 3*W*H.
type Image struct {
	W, H int
	Pix  []uint8
}

// MaxPixels is the largest image, in pixels, that Decode, Load and the
// transforms accept: PIL's decompression-bomb limit (twice
// Image.MAX_IMAGE_PIXELS), beyond which PIL refuses to open an image.
const MaxPixels = 2 * (1024 * 1024 * 1024 / 4 / 3)

var (
	// ErrFormat marks data that is neither a JPEG nor a PNG image.
	ErrFormat = errors.New("not a JPEG or PNG image")
	// ErrTooLarge marks an image or a requested size above MaxPixels.
	ErrTooLarge = errors.New("image too large")
	// ErrInvalid marks an Image whose fields disagree or a size that is not
	// positive.
	ErrInvalid = errors.New("invalid image or size")
)

// NewImage returns a black image of w×h pixels, or an error wrapping
// ErrInvalid or ErrTooLarge.
func NewImage(w, h int) (*Image, error) {
	if err := checkSize(w, h); err != nil {
		return nil, fmt.Errorf("imagenet: new image: %w", err)
	}
	return &Image{W: w, H: h, Pix: make([]uint8, 3*w*h)}, nil
}

// checkSize checks that w×h is a positive size of at most MaxPixels.
func checkSize(w, h int) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("size %dx%d: %w", w, h, ErrInvalid)
	}
	if int64(w)*int64(h) > MaxPixels {
		return fmt.Errorf("size %dx%d: more than %d pixels: %w", w, h, MaxPixels, ErrTooLarge)
	}
	return nil
}

// Check reports an error wrapping ErrInvalid unless img is a non-empty image
// whose Pix holds exactly its W×H pixels.
func (img *Image) Check() error {
	if img == nil {
		return fmt.Errorf("imagenet: nil image: %w", ErrInvalid)
	}
	if err := checkSize(img.W, img.H); err != nil {
		return fmt.Errorf("imagenet: image: %w", err)
	}
	if len(img.Pix) != 3*img.W*img.H {
		return fmt.Errorf("imagenet: %dx%d image has %d bytes of pixels, want %d: %w",
			img.W, img.H, len(img.Pix), 3*img.W*img.H, ErrInvalid)
	}
	return nil
}

// Clone returns a copy of img that shares no memory with it.
func (img *Image) Clone() *Image {
	return &Image{W: img.W, H: img.H, Pix: bytes.Clone(img.Pix)}
}

// Load reads the JPEG or PNG image file at path as PIL's
// Image.open(path).convert("RGB") does (see Decode). Errors name path.
func Load(path string) (*Image, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("imagenet: %w", err)
	}
	img, err := decode(data, MaxPixels)
	if err != nil {
		return nil, fmt.Errorf("imagenet: image %q: %w", path, err)
	}
	return img, nil
}

// Decode reads a JPEG or PNG image, recognised by its content, and converts
// it to 8-bit RGB as PIL's Image.open(f).convert("RGB") does: grayscale is
// replicated, palettes are looked up (an index past a short palette's end is
// the gray (i, i, i), as in PIL), alpha and tRNS transparency are dropped,
// 16-bit RGB and gray+alpha samples keep their high byte, 16-bit grayscale
// is clipped to 0..255 (PIL opens it as 32-bit integers and clips them), and
// CMYK JPEGs convert with PIL's formula. Images above MaxPixels are refused
// before they are decoded.
func Decode(r io.Reader) (*Image, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("imagenet: reading image: %w", err)
	}
	img, err := decode(data, MaxPixels)
	if err != nil {
		return nil, fmt.Errorf("imagenet: image: %w", err)
	}
	return img, nil
}

// pngSignature and jpegSignature start PNG and JPEG files (JPEG: the SOI
// marker and the first byte of the next marker, as PIL checks).
const (
	pngSignature  = "\x89PNG\r\n\x1a\n"
	jpegSignature = "\xff\xd8\xff"
)

// decode decodes data, refusing images above maxPixels before decoding
// them. Errors do not name the file.
func decode(data []byte, maxPixels int64) (*Image, error) {
	var (
		format string
		cfg    image.Config
		err    error
	)
	switch {
	case bytes.HasPrefix(data, []byte(pngSignature)):
		format = "PNG"
		cfg, err = png.DecodeConfig(bytes.NewReader(data))
	case bytes.HasPrefix(data, []byte(jpegSignature)):
		format = "JPEG"
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(data))
	default:
		return nil, ErrFormat
	}
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", format, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("%s: size %dx%d: %w", format, cfg.Width, cfg.Height, ErrInvalid)
	}
	if n := int64(cfg.Width) * int64(cfg.Height); n > maxPixels {
		return nil, fmt.Errorf("%s: %dx%d is %d pixels, more than %d: %w",
			format, cfg.Width, cfg.Height, n, maxPixels, ErrTooLarge)
	}
	var m image.Image
	if format == "PNG" {
		m, err = png.Decode(bytes.NewReader(data))
	} else {
		m, err = jpeg.Decode(bytes.NewReader(data))
	}
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", format, err)
	}
	var hdr pngHeader
	if format == "PNG" {
		hdr = readPNGHeader(data)
	}
	return toRGB(m, hdr), nil
}

// toRGB converts a decoded image to RGB as PIL's convert("RGB") converts
// the image PIL opens from the same file; hdr describes a PNG's header.
func toRGB(m image.Image, hdr pngHeader) *Image {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	out := &Image{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	switch m := m.(type) {
	case *image.YCbCr:
		ycbcrToRGB(out, m)
		return out
	case *image.Gray:
		for y := range h {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			dst := out.Pix[3*w*y : 3*w*(y+1)]
			for x := range w {
				v := row[x]
				dst[3*x], dst[3*x+1], dst[3*x+2] = v, v, v
			}
		}
		return out
	case *image.Paletted:
		pal := make([][3]uint8, 256)
		for i := range pal {
			pal[i] = [3]uint8{uint8(i), uint8(i), uint8(i)}
		}
		n := min(len(m.Palette), 256)
		if hdr.hasPLTE {
			// Go pads a short palette with opaque black up to the largest
			// index; PIL's entries past the PLTE chunk are the gray ramp.
			n = min(n, hdr.paletteLen)
		}
		for i, c := range m.Palette[:n] {
			nc := color.NRGBAModel.Convert(c).(color.NRGBA)
			pal[i] = [3]uint8{nc.R, nc.G, nc.B}
		}
		for y := range h {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			dst := out.Pix[3*w*y : 3*w*(y+1)]
			for x := range w {
				p := pal[row[x]]
				dst[3*x], dst[3*x+1], dst[3*x+2] = p[0], p[1], p[2]
			}
		}
		return out
	case *image.CMYK:
		for y := range h {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			dst := out.Pix[3*w*y : 3*w*(y+1)]
			for x := range w {
				c, mm, yy, k := row[4*x], row[4*x+1], row[4*x+2], row[4*x+3]
				dst[3*x], dst[3*x+1], dst[3*x+2] = cmykToRGB(c, k), cmykToRGB(mm, k), cmykToRGB(yy, k)
			}
		}
		return out
	case *image.RGBA:
		// Opaque: PNG RGB without tRNS, JPEG stored as RGB.
		copyPix(out, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 4, 1)
		return out
	case *image.NRGBA:
		copyPix(out, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 4, 1)
		return out
	case *image.RGBA64:
		copyPix(out, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 8, 2)
		return out
	case *image.NRGBA64:
		if hdr.colorType == pngGray && hdr.bitDepth == 16 {
			// 16-bit gray with tRNS: clipped as below.
			clip16(out, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 8)
			return out
		}
		copyPix(out, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 8, 2)
		return out
	case *image.Gray16:
		// PIL opens 16-bit gray as mode I (32-bit integers), and convert
		// clips those to 0..255.
		clip16(out, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 2)
		return out
	}
	// Not a type Go's PNG and JPEG decoders return: its colours, as 8-bit
	// non-premultiplied values.
	for y := range h {
		dst := out.Pix[3*w*y : 3*w*(y+1)]
		for x := range w {
			c := color.NRGBAModel.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			dst[3*x], dst[3*x+1], dst[3*x+2] = c.R, c.G, c.B
		}
	}
	return out
}

// copyPix copies the R, G and B samples of interleaved pixels of size bytes
// starting at pix[off] (rows stride bytes apart) into out, taking the first
// byte of samples of sampleSize bytes (big-endian: the high byte).
func copyPix(out *Image, pix []uint8, stride, off, size, sampleSize int) {
	w := out.W
	for y := range out.H {
		row := pix[off+y*stride:]
		dst := out.Pix[3*w*y : 3*w*(y+1)]
		for x := range w {
			p := row[size*x:]
			dst[3*x], dst[3*x+1], dst[3*x+2] = p[0], p[sampleSize], p[2*sampleSize]
		}
	}
}

// clip16 writes min(v, 255) of the first 16-bit big-endian sample of each
// pixel of size bytes, starting at pix[off], into all three channels of out.
func clip16(out *Image, pix []uint8, stride, off, size int) {
	w := out.W
	for y := range out.H {
		row := pix[off+y*stride:]
		dst := out.Pix[3*w*y : 3*w*(y+1)]
		for x := range w {
			v := uint8(min(int(row[size*x])<<8|int(row[size*x+1]), 255))
			dst[3*x], dst[3*x+1], dst[3*x+2] = v, v, v
		}
	}
}

// cmykToRGB is one channel of PIL's cmyk2rgb: 255 − k − c·(255 − k)/255,
// with PIL's rounded division by 255.
func cmykToRGB(c, k uint8) uint8 {
	nk := 255 - int(k)
	t := int(c)*nk + 128
	v := nk - ((t>>8)+t)>>8
	return uint8(max(v, 0))
}
