//go:build !openblas

package cpu

// blasName names the matmul library in the environment lines.
const blasName = "gonum"
