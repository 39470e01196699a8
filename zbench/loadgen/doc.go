// Package loadgen is zbench's load generator for servers that speak the
// OpenAI completions API (zbench serve, llama.cpp's server, vLLM): it
// sends requests from a dataset in the scenarios MLPerf Inference names
// (Offline, Server, SingleStream), streams each response, and reports
// throughput, time to first token (TTFT), time per output token (TPOT),
// inter-token latency (ITL) and end-to-end latency percentiles, goodput
// and the pass/fail verdict against latency bounds, in Go's benchmark
// format.
package loadgen
