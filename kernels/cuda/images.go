//go:build cuda

package cuda

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ptxEntry matches the name of each kernel a PTX image defines.
var ptxEntry = regexp.MustCompile(`\.entry (\w+)\(`)

// imageEntries returns the kernels an image defines: the .entry names of
// PTX, or the global function symbols of a cubin (an ELF file). The loader
// looks each kernel up in the one module that holds it, so that the driver
// is never asked for a kernel a module lacks (compute-sanitizer reports
// every such miss as an API error).
func imageEntries(name string, img []byte) ([]string, error) {
	var out []string
	if strings.HasSuffix(name, ".ptx") {
		for _, m := range ptxEntry.FindAllSubmatch(img, -1) {
			out = append(out, string(m[1]))
		}
		return out, nil
	}
	// NVIDIA puts its own ELF version into cubins, which debug/elf
	// refuses: read a copy with the standard version.
	if len(img) <= 24 {
		return nil, fmt.Errorf("kernel image %s: %d bytes, too short for an ELF file", name, len(img))
	}
	img = slices.Clone(img)
	img[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint32(img[20:], uint32(elf.EV_CURRENT))
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return nil, fmt.Errorf("kernel image %s: %w", name, err)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("kernel image %s: %w", name, err)
	}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && elf.ST_BIND(s.Info) == elf.STB_GLOBAL {
			out = append(out, s.Name)
		}
	}
	return out, nil
}
