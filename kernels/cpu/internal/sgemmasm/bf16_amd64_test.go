//go:build amd64 && !purego

package sgemmasm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBF16Encodings checks every VDPBF16PS that bf16_amd64.s writes as
// bytes against GNU as's encoding of the instruction its comment names
// (binutils comes with gcc, which cgo needs).
func TestBF16Encodings(t *testing.T) {
	src, err := os.ReadFile("bf16_amd64.s")
	require.NoError(t, err)
	line := regexp.MustCompile(`^\t((?:BYTE \$0x[0-9a-f]{2}(?:; )?)+) // VDPBF16PS Z(\d+), Z(\d+), Z(\d+)$`)
	var want []byte
	var intel strings.Builder
	intel.WriteString(".intel_syntax noprefix\n")
	n := 0
	for l := range strings.SplitSeq(string(src), "\n") {
		if !strings.Contains(l, "BYTE") {
			continue
		}
		m := line.FindStringSubmatch(l)
		require.NotNil(t, m, "a BYTE line without its instruction: %q", l)
		for b := range strings.SplitSeq(m[1], "; ") {
			v, err := strconv.ParseUint(strings.TrimPrefix(b, "BYTE $0x"), 16, 8)
			require.NoError(t, err)
			want = append(want, byte(v))
		}
		fmt.Fprintf(&intel, "vdpbf16ps zmm%s, zmm%s, zmm%s\n", m[2], m[3], m[4])
		n++
	}
	require.Equal(t, 24*5, n, "VDPBF16PS instructions in bf16_amd64.s")
	as, err := exec.LookPath("as")
	require.NoError(t, err, "GNU as (binutils) checks the encodings")
	dir := t.TempDir()
	s, o, bin := filepath.Join(dir, "x.s"), filepath.Join(dir, "x.o"), filepath.Join(dir, "x.bin")
	require.NoError(t, os.WriteFile(s, []byte(intel.String()), 0o644))
	out, err := exec.Command(as, "--64", "-o", o, s).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command("objcopy", "-O", "binary", "-j", ".text", o, bin).CombinedOutput()
	require.NoError(t, err, "%s", out)
	got, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "bf16_amd64.s's bytes differ from GNU as's:\n% x\n% x", want, got)
}
