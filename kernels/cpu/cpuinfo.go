package cpu

import (
	"bufio"
	"os"
	"runtime"
	"strings"
)

// cpuModel reads the processor's model name from /proc/cpuinfo, falling back
// to the architecture.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}
