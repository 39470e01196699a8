// Package zbench is the benchmark harness: the devices to run on, Measure
// around testing.B (warm-up outside the timer, the device synchronised inside
// it, metrics reported), the roofline guard that refuses results above a
// device's peak, and the environment printed as benchfmt configuration
// lines.
//
// # Writing a benchmark in your own module
//
// A benchmark of your own is an ordinary Go benchmark that calls Measure
// with the operation, its Workload (FLOPs and minimum bytes, which the
// roofline guard checks) and, optionally, a Verify that returns the
// relative error against a reference with the MaxRelErr it must stay
// within, which the result carries as rel-err-bound for zbench compare's
// accuracy gate; see Example.
//
// Register the backends to run on by importing them: kernels/cpu always,
// kernels/cuda in a file built with the cuda tag. Package zbench registers
// none, so that programs that only analyse results link neither.
//
// Print the environment once, from TestMain, before any result. Without
// it the output has no configuration lines (commit, BLAS, CPU or GPU,
// peaks) and no Unit lines, so benchstat and zbench compare cannot tell
// which direction of GFLOP/s or rel-err is better, derive %peak, or see
// that two files come from different machines:
//
//	func TestMain(m *testing.M) {
//		flag.Parse()
//		if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
//			devs, err := zbench.Devices()
//			if err == nil {
//				err = zbench.PrintEnv(os.Stdout, devs)
//			}
//			if err != nil {
//				fmt.Fprintln(os.Stderr, err)
//				os.Exit(2)
//			}
//		}
//		os.Exit(m.Run())
//	}
package zbench
