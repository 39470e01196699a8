package imagenet

import (
	"bytes"
	"encoding/binary"
)

// PNG colour types (the PNG specification, section 11.2.2).
const (
	pngGray = 0
)

// pngHeader is what toRGB needs of a PNG file beyond what Go's decoder
// returns: the IHDR chunk's bit depth and colour type (16-bit gray decodes
// to the same image types as 16-bit gray+alpha, which PIL converts
// differently) and the number of PLTE entries (Go pads a short palette).
type pngHeader struct {
	bitDepth, colorType int
	paletteLen          int
	hasPLTE             bool
}

// readPNGHeader reads the chunks of the PNG data up to the first IDAT. It
// runs after Go's decoder has accepted data, so it stops quietly at anything
// malformed; the zero pngHeader describes no PNG.
func readPNGHeader(data []byte) pngHeader {
	var h pngHeader
	if !bytes.HasPrefix(data, []byte(pngSignature)) {
		return h
	}
	rest := data[len(pngSignature):]
	for len(rest) >= 8 {
		n := binary.BigEndian.Uint32(rest)
		kind := string(rest[4:8])
		if uint64(n) > uint64(len(rest)-8) {
			break
		}
		body := rest[8 : 8+n]
		switch kind {
		case "IHDR":
			if len(body) >= 10 {
				h.bitDepth, h.colorType = int(body[8]), int(body[9])
			}
		case "PLTE":
			h.paletteLen, h.hasPLTE = len(body)/3, true
		case "IDAT", "IEND":
			return h
		}
		if uint64(len(rest)) < 12+uint64(n) {
			break
		}
		rest = rest[12+n:]
	}
	return h
}
