package imagenet_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zbench/zbench/internal/golden"
	"github.com/zbench/zbench/models/imagenet"
	"github.com/zbench/zbench/models/safetensors"
)

// imageDir holds the images of testdata/reference/imagenet.py's golden
// file, testdata/golden/imagenet.safetensors.
const imageDir = "../../testdata/golden/imagenet"

// JPEG bounds: Go's inverse DCT differs from libjpeg-turbo's (PIL's) by ±1
// in about 1% of the Y, Cb and Cr samples (cat.jpg: 1.8% of luma, 1.2% of
// upsampled chroma), which the YCbCr-to-RGB conversion widens to at most 3
// levels (1 of luma and 1 of chroma times up to 1.772). On the golden
// photographs (go test -v prints the figures) 97% of the decoded samples are
// exact and the rest differ by 1 to 3; the resized images likewise (at most
// 3, 0.035 on average), and the normalised tensors by at most 3/(255·0.225)
// ≈ 0.0523. (Go's own YCbCr conversion, which replicates chroma where
// libjpeg interpolates it, differs from PIL by up to 31 levels on the same
// files.)
const (
	jpegMaxAbsBound  = 3
	jpegMeanAbsBound = 0.1
	jpegPixelBound   = jpegMaxAbsBound / (255 * 0.224)
)

// goldenFile is the opened golden file, whose cases are named
// <kind>/<case> or after their image file.
type goldenFile struct {
	f *safetensors.File
}

func openGolden(t *testing.T) goldenFile {
	t.Helper()
	path, err := golden.Path("imagenet.safetensors")
	require.NoError(t, err)
	f, err := safetensors.Open(path)
	require.NoError(t, err)
	return goldenFile{f}
}

// files returns the image files (paths relative to imageDir) that have the
// role, sorted.
func (g goldenFile) files(t *testing.T, role string) []string {
	t.Helper()
	var out []string
	for _, name := range g.f.Tensors() {
		rel, ok := strings.CutSuffix(name, "/"+role)
		if ok && (strings.HasSuffix(rel, ".png") || strings.HasSuffix(rel, ".jpg")) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	require.NotEmpty(t, out, role)
	return out
}

// cases returns the names of the cases of kind ("resize", "crop"), sorted.
func (g goldenFile) cases(t *testing.T, kind string) []string {
	t.Helper()
	var out []string
	for _, name := range g.f.Tensors() {
		if rest, ok := strings.CutPrefix(name, kind+"/"); ok {
			if c, ok := strings.CutSuffix(rest, "/input"); ok {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	require.NotEmpty(t, out, kind)
	return out
}

// params decodes the JSON metadata of key.
func (g goldenFile) params(t *testing.T, key string) map[string]any {
	t.Helper()
	var p map[string]any
	_, _, err := golden.ReadParams(g.f, key, &p)
	require.NoError(t, err, "metadata %q", key)
	return p
}

// image returns the U8 tensor name [H, W, 3] as an Image.
func (g goldenFile) image(t *testing.T, name string) *imagenet.Image {
	t.Helper()
	tt, err := g.f.Tensor(name)
	require.NoError(t, err)
	require.Equal(t, "U8", tt.DType, name)
	require.Len(t, tt.Shape, 3, name)
	require.Equal(t, 3, tt.Shape[2], name)
	img := &imagenet.Image{W: tt.Shape[1], H: tt.Shape[0], Pix: tt.Data}
	require.NoError(t, img.Check(), name)
	return img
}

// floats returns the F32 tensor name, checking its shape.
func (g goldenFile) floats(t *testing.T, name string, shape ...int) []float32 {
	t.Helper()
	tt, err := g.f.Tensor(name)
	require.NoError(t, err)
	require.Equal(t, shape, tt.Shape, name)
	v, err := tt.Float32()
	require.NoError(t, err, name)
	return v
}

// diffU8 returns the largest and the mean |a[i] − b[i]|.
func diffU8(a, b []uint8) (maxAbs int, meanAbs float64) {
	sum := 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		maxAbs = max(maxAbs, d, -d)
		sum += max(d, -d)
	}
	return maxAbs, float64(sum) / float64(len(a))
}

// maxAbsF32 returns the largest |a[i] − b[i]|.
func maxAbsF32(a, b []float32) float64 {
	m := 0.0
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// TestGoldenPhotos runs the whole transform on each photograph, PNG and
// JPEG, against torchvision on PIL: the PNGs exactly, the JPEGs within the
// bounds above.
func TestGoldenPhotos(t *testing.T) {
	g := openGolden(t)
	for _, rel := range g.files(t, "resized") {
		t.Run(rel, func(t *testing.T) {
			p := g.params(t, rel)
			img, err := imagenet.Load(filepath.Join(imageDir, rel))
			require.NoError(t, err)
			assert.Equal(t, p["size"], []any{float64(img.W), float64(img.H)})

			want := g.image(t, rel+"/resized")
			got, err := imagenet.ResizeShorter(img, imagenet.ResizeSize)
			require.NoError(t, err)
			require.Equal(t, [2]int{want.W, want.H}, [2]int{got.W, got.H}, "resized size")
			pixels, err := imagenet.Preprocess(img)
			require.NoError(t, err)
			wantPix := g.floats(t, rel+"/pixel_values", 3, imagenet.CropSize, imagenet.CropSize)
			require.Len(t, pixels, len(wantPix))
			maxResized, meanResized := diffU8(got.Pix, want.Pix)
			maxPixels := maxAbsF32(pixels, wantPix)
			t.Logf("%s: resized %dx%d max-abs %d (mean %.4f), pixel_values max-abs %.4g",
				rel, got.W, got.H, maxResized, meanResized, maxPixels)
			if p["format"] == "png" {
				require.Equal(t, want.Pix, got.Pix, "resized")
				require.Equal(t, wantPix, pixels, "pixel_values")
				return
			}
			assert.LessOrEqual(t, maxResized, jpegMaxAbsBound, "resized")
			assert.LessOrEqual(t, meanResized, jpegMeanAbsBound, "resized")
			assert.LessOrEqual(t, maxPixels, jpegPixelBound, "pixel_values")
		})
	}
}

// TestGoldenDecode decodes PNGs of every colour type and bit depth, and
// JPEGs of every chroma subsampling, against PIL's convert("RGB").
func TestGoldenDecode(t *testing.T) {
	g := openGolden(t)
	for _, rel := range g.files(t, "decoded") {
		t.Run(rel, func(t *testing.T) {
			p := g.params(t, rel)
			want := g.image(t, rel+"/decoded")
			got, err := imagenet.Load(filepath.Join(imageDir, rel))
			require.NoError(t, err)
			require.Equal(t, [2]int{want.W, want.H}, [2]int{got.W, got.H}, "size")
			maxAbs, meanAbs := diffU8(got.Pix, want.Pix)
			t.Logf("%s (%s, PIL mode %v): max-abs %d (mean %.4f)", rel, p["format"], p["mode"], maxAbs, meanAbs)
			if p["format"] == "png" {
				require.Equal(t, want.Pix, got.Pix)
				return
			}
			assert.LessOrEqual(t, maxAbs, jpegMaxAbsBound)
			assert.LessOrEqual(t, meanAbs, jpegMeanAbsBound)
		})
	}
}

// TestGoldenResize compares Resize with Pillow's resize on random pixels.
func TestGoldenResize(t *testing.T) {
	g := openGolden(t)
	for _, name := range g.cases(t, "resize") {
		rel := "resize/" + name
		t.Run(name, func(t *testing.T) {
			size := g.params(t, rel)["size"].([]any)
			w, h := int(size[0].(float64)), int(size[1].(float64))
			got, err := imagenet.Resize(g.image(t, rel+"/input"), w, h)
			require.NoError(t, err)
			want := g.image(t, rel+"/output")
			require.Equal(t, [2]int{want.W, want.H}, [2]int{got.W, got.H})
			require.Equal(t, want.Pix, got.Pix)
		})
	}
}

// TestGoldenCrop compares CenterCrop with torchvision's, padding included.
func TestGoldenCrop(t *testing.T) {
	g := openGolden(t)
	for _, name := range g.cases(t, "crop") {
		rel := "crop/" + name
		t.Run(name, func(t *testing.T) {
			crop := g.params(t, rel)["crop"].([]any)
			h, w := int(crop[0].(float64)), int(crop[1].(float64))
			got, err := imagenet.CenterCrop(g.image(t, rel+"/input"), h, w)
			require.NoError(t, err)
			want := g.image(t, rel+"/output")
			require.Equal(t, [2]int{want.W, want.H}, [2]int{got.W, got.H})
			require.Equal(t, want.Pix, got.Pix)
		})
	}
}

// TestGoldenNormalize checks ToTensor and Normalize on every byte value of
// every channel.
func TestGoldenNormalize(t *testing.T) {
	g := openGolden(t)
	got, err := imagenet.Normalize(g.image(t, "normalize/input"), imagenet.Mean, imagenet.Std)
	require.NoError(t, err)
	want := g.floats(t, "normalize/output", 3, 1, 256)
	for i := range want {
		require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "element %d: %v, want %v", i, got[i], want[i])
	}
}

// TestGoldenFilesListed checks that the image folder holds exactly the
// files the golden describes, and the golden's provenance.
func TestGoldenFilesListed(t *testing.T) {
	g := openGolden(t)
	var listed []string
	for key := range g.f.Metadata() {
		if strings.HasSuffix(key, ".png") || strings.HasSuffix(key, ".jpg") {
			listed = append(listed, key)
		}
	}
	var found []string
	require.NoError(t, filepath.WalkDir(imageDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(imageDir, path)
		found = append(found, filepath.ToSlash(rel))
		return err
	}))
	slices.Sort(listed)
	slices.Sort(found)
	require.Equal(t, listed, found)
	meta := g.f.Metadata()
	assert.Equal(t, "testdata/reference/imagenet.py", meta["script"])
	assert.Contains(t, meta["reference"], "torchvision")
	assert.Contains(t, meta["reference"], "Pillow")
}
