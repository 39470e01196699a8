# zbench entry points. README.md names two of them: `make bench` (the main
# job) and `make test` (the tests, what CI runs). Both install what they need.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

GO        := $(shell scripts/install-go.sh)
ifeq ($(GO),)
$(error no usable Go: scripts/install-go.sh failed (see its messages above))
endif
PY        := /usr/bin/python3
MACHINE   ?= $(shell scripts/machine-id.sh)
BASELINE  := baselines/$(MACHINE)
OUT       := .cache/bench
COUNT     ?= 6
# bench-quick's runs of the -short set; baseline-quick takes QUICK_BASE_COUNT.
QUICK_COUNT ?= 6
QUICK_BASE_COUNT ?= 10
RUN       ?= zbench
# make bench's peers and its interleaved rounds.
PEERS     ?= torch onnxruntime llamacpp
ROUNDS    ?= 3
GGUF_DIR  := .cache/gguf
GGUF_TYPES ?= F32 F16 BF16 Q8_0 Q4_0
BENCHTIME ?= 1s
BENCH     ?= .
BENCHSTAT := $(GO) tool benchstat -table ""
# $(call ran,FILE,VAR) fails when FILE, the output of go test -bench=$(VAR),
# holds no benchmark result: go test runs nothing for a pattern that matches
# no name and still exits 0. go test splits a -bench pattern at its top-level
# | into alternatives and each at / into one regexp per level of a name.
# $(call save,FILE) is the end of a pipe into FILE: shown unless QUIET, and
# appended to with APPEND.
save = $(if $(QUIET),cat >$(if $(APPEND),>) $(1),tee $(if $(APPEND),-a) $(1))
ran = grep -q '^Benchmark' $(1) || { echo 'no benchmark result in $(1): -bench='\''$($(2))'\'' matched nothing: go test splits the pattern at its top-level | into alternatives and each at / into one regexp per level of the name ("BERT/dev=cpu|LlamaDecode/dev=cpu").' >&2; exit 1; }

export GOTOOLCHAIN := local
# zbench diff and calibrate build benchmark binaries with the go command.
export PATH := $(dir $(GO)):$(PATH)

# The CUDA toolchain (nvcc, headers, a link-only libcuda) lives in
# .cache/cuda, installed by scripts/install-cuda.sh on first use.
CUDA      := $(CURDIR)/.cache/cuda
CUDA_ENV  := CGO_CFLAGS="-O2 -I$(CUDA)/usr/include" CGO_LDFLAGS="-O2 -L$(CUDA)/usr/lib/x86_64-linux-gnu/stubs"
# Where the cuda-tagged tests run here: the stub, so the GPU is absent.
CUDA_STUB := $(CURDIR)/.cache/cuda-stub
GPU_BIN   := bin/gpu

.PHONY: test lint unit race bench-smoke bench bench-quick quick-run benchcmp tables \
	bench-run peer-run rounds profile-resnet onnxruntime llamacpp gguf-models baseline baseline-quick golden python-ref bench-engine cpu-engines \
	cuda-toolkit kernels kernels-verify cuda-stub cuda-check gpu-bin gpu-rehearse report diff calibrate tokenizer-ref

## test: formatting, vet, staticcheck, unit and golden tests, the race
## detector on the harness, one quick pass over every benchmark, and the
## CUDA build checks (no GPU needed).
test: lint unit race bench-smoke cuda-check peer-test

lint:
	@echo "== gofmt"; out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "not gofmt-ed:"; echo "$$out"; exit 1; fi
	@echo "== go vet"; $(GO) vet ./...
	@echo "== staticcheck"; $(GO) tool staticcheck ./...
	@echo "== vet and staticcheck without cgo (the CPU backend's pure-Go build)"; CGO_ENABLED=0 $(GO) vet ./kernels/cpu/ && CGO_ENABLED=0 $(GO) tool staticcheck ./kernels/cpu/

unit: tokenizer-ref cpu-engines
	@echo "== go test"; ZBENCH_REQUIRE_REF=1 ZBENCH_REQUIRE_ENGINES=1 $(GO) test ./...
	@echo "== the CPU conformance suite under each engine"
	ZBENCH_CPU_ENGINE=purego $(GO) test -count=1 ./kernels/cpu/
	ZBENCH_CPU_ENGINE=openblas $(GO) test -count=1 ./kernels/cpu/
	ZBENCH_CPU_ENGINE=onednn $(GO) test -count=1 ./kernels/cpu/
	@echo "== the CPU backend without its assembly (-tags purego: the kernels and panel widths of a machine without AVX-512)"
	$(GO) test -tags purego -count=1 ./kernels/cpu/... ./models/llama/

## cpu-engines: OpenBLAS's and oneDNN's runtimes, which the CPU backend loads
## when present.
cpu-engines:
	@scripts/install-cpu-engines.sh

## tokenizer-ref: the references the tokenizer tests compare with, in
## .cache/tokenizer-ref (npm packages, Llama 2's tokenizer.json).
tokenizer-ref:
	@scripts/install-tokenizer-ref.sh

race:
	@echo "== go test -race (harness, pool)"; $(GO) test -race ./zbench/... ./kernels/mempool/...

bench-smoke:
	@echo "== one -short pass over every benchmark"
	$(GO) test -short -run='^$$' -bench=. -benchtime=1x ./...

## bench: the full suite and every peer on this machine (PyTorch, ONNX
## Runtime, llama.cpp; PEERS chooses), each benchmark COUNT times in ROUNDS
## interleaved rounds (zbench, then each peer, COUNT/ROUNDS times each), then
## benchstat against the committed baseline and against each peer.
bench: rounds tables report

## benchcmp: the same runs, printing only the benchstat tables.
benchcmp:
	@$(MAKE) --no-print-directory rounds QUIET=1
	@$(MAKE) --no-print-directory tables

# rounds: ROUNDS rounds of bench-run and peer-run, COUNT/ROUNDS each, the
# first writing the output files and the others appending to them, so that a
# noisy stretch of the machine lands on zbench and its peers alike.
rounds:
	@per=$$(( $(COUNT) / $(ROUNDS) )); [ "$$per" -ge 1 ] || { echo "COUNT=$(COUNT) is less than ROUNDS=$(ROUNDS)" >&2; exit 1; }; \
	for r in $$(seq 1 $(ROUNDS)); do \
		echo "== round $$r of $(ROUNDS), -count $$per each"; \
		$(MAKE) --no-print-directory bench-run peer-run COUNT=$$per $$([ "$$r" -gt 1 ] && echo APPEND=1); \
	done

## bench-quick: the -short set QUICK_COUNT times (enough for verdicts),
## against this machine's committed quick baseline, zbench-quick.txt.
bench-quick: quick-run
	@$(MAKE) --no-print-directory tables NOPEER=1 RUN=zbench-quick

quick-run:
	@mkdir -p $(OUT)
	@echo "== zbench: go test -short -bench='$(BENCH)' -count=$(QUICK_COUNT) ./bench_test/ > $(OUT)/zbench-quick.txt"
	$(GO) test -short -run='^$$' -bench='$(BENCH)' -count=$(QUICK_COUNT) ./bench_test/ | tee $(OUT)/zbench-quick.txt
	@$(call ran,$(OUT)/zbench-quick.txt,BENCH)

bench-run: cpu-engines tokenizer-ref
	@mkdir -p $(OUT)
	@echo "== zbench: go test -bench='$(BENCH)' -count=$(COUNT) -benchtime=$(BENCHTIME) ./bench_test/ >$(if $(APPEND),>) $(OUT)/zbench.txt"
	$(GO) test -run='^$$' -bench='$(BENCH)' -count=$(COUNT) -benchtime=$(BENCHTIME) -timeout=2h ./bench_test/ | $(call save,$(OUT)/zbench.txt)
	@$(call ran,$(OUT)/zbench.txt,BENCH)

## peer-run: each peer of PEERS over BENCH, into $(OUT)/<peer>.txt; a peer
## with no benchmark in BENCH prints its configuration lines only.
peer-run: $(addprefix peer-run-,$(PEERS))

peer-run-torch: python-ref
	@mkdir -p $(OUT)
	@echo "== PyTorch peer: baselines/peers/torch_bench.py --count $(COUNT) >$(if $(APPEND),>) $(OUT)/torch.txt"
	$(PY) baselines/peers/torch_bench.py --count $(COUNT) --benchtime $(BENCHTIME) --bench '$(BENCH)' | $(call save,$(OUT)/torch.txt)

# ONNX Runtime runs BERT, ResNet and the single-op Kernels and MatMul
# points: with a BENCH that selects none, it neither installs nor runs.
peer-run-onnxruntime:
	@mkdir -p $(OUT)
	@if ! node baselines/peers/onnxpeer/bench.mjs --selects --bench '$(BENCH)'; then \
		echo "== ONNX Runtime peer: -bench='$(BENCH)' selects none of its benchmarks"; $(if $(APPEND),:,: > $(OUT)/onnxruntime.txt); exit 0; fi; \
	$(MAKE) --no-print-directory onnxruntime; \
	echo "== ONNX Runtime peer: baselines/peers/onnxpeer/bench.mjs --count $(COUNT) >$(if $(APPEND),>) $(OUT)/onnxruntime.txt"; \
	node baselines/peers/onnxpeer/bench.mjs --count $(COUNT) --benchtime $(BENCHTIME) --bench '$(BENCH)' | $(call save,$(OUT)/onnxruntime.txt)

# llama.cpp runs only the Llama benchmarks: with a BENCH that selects none,
# it neither writes its GGUF files nor runs.
peer-run-llamacpp:
	@mkdir -p $(OUT)
	@if ! node baselines/peers/llamacpp/bench.mjs --selects --bench '$(BENCH)'; then \
		echo "== llama.cpp peer: -bench='$(BENCH)' selects none of its benchmarks"; $(if $(APPEND),:,: > $(OUT)/llamacpp.txt); exit 0; fi; \
	$(MAKE) --no-print-directory llamacpp gguf-models; \
	echo "== llama.cpp peer: baselines/peers/llamacpp/bench.mjs --count $(COUNT) >$(if $(APPEND),>) $(OUT)/llamacpp.txt"; \
	node baselines/peers/llamacpp/bench.mjs --count $(COUNT) --benchtime $(BENCHTIME) --bench '$(BENCH)' \
		$(foreach t,$(GGUF_TYPES),$(GGUF_DIR)/tinyllama-$(t).gguf) | $(call save,$(OUT)/llamacpp.txt)

## onnxruntime, llamacpp: the ONNX Runtime and llama.cpp peers' engines, from
## npm (pinned by the committed lockfiles), and ONNX Runtime's models.
onnxruntime:
	@scripts/install-onnxruntime.sh
llamacpp:
	@scripts/install-llamacpp.sh

## gguf-models: the synthetic TinyLlama of the Llama benchmarks as GGUF files
## in each of GGUF_TYPES, written by the reference writer, for llama.cpp.
gguf-models: tokenizer-ref python-ref
	@mkdir -p $(GGUF_DIR)
	@for t in $(GGUF_TYPES); do f=$(GGUF_DIR)/tinyllama-$$t.gguf; \
		if [ ! -s $$f ] || [ testdata/reference/gguf.py -nt $$f ]; then \
			echo "== testdata/reference/gguf.py synth --model tinyllama --type $$t --out $$f"; \
			$(PY) testdata/reference/gguf.py synth --model tinyllama --type $$t --out $$f.tmp && mv $$f.tmp $$f; \
		fi; done

tables:
	@if [ -f $(BASELINE)/$(RUN).txt ]; then \
		echo; echo "== benchstat: committed baseline $(BASELINE)/$(RUN).txt vs this run"; \
		$(BENCHSTAT) baseline=$(BASELINE)/$(RUN).txt this-run=$(OUT)/$(RUN).txt; \
		echo; echo "== zbench compare: verdicts, environment, accuracy gate and roofline, committed baseline vs this run"; \
		$(GO) run ./cmd/zbench compare $(BASELINE)/$(RUN).txt $(OUT)/$(RUN).txt; \
	else \
		echo; echo "== no committed baseline $(BASELINE)/$(RUN).txt for this machine ($(MACHINE)); run make $(if $(filter zbench-quick,$(RUN)),baseline-quick,baseline) to make one"; \
		others=$$(ls baselines/*/$(RUN).txt 2>/dev/null || true); \
		if [ -n "$$others" ]; then echo "   other machines' baselines (zbench compare labels the hardware difference):"; \
			for f in $$others; do echo "     $(GO) run ./cmd/zbench compare $$f $(OUT)/$(RUN).txt"; done; fi; \
	fi
	@if [ -z "$${NOPEER:-}" ]; then for p in $(PEERS); do \
		f=$(OUT)/$$p.txt; grep -q '^Benchmark' $$f 2>/dev/null || continue; \
		echo; echo "== benchstat: $$p peer vs zbench, same machine, same run"; \
		$(BENCHSTAT) $$p=$$f zbench=$(OUT)/$(RUN).txt; \
		echo; echo "== zbench compare: $$p peer (base) vs zbench, environment and verdicts"; \
		$(GO) run ./cmd/zbench compare $$f $(OUT)/$(RUN).txt; done; fi

## report: an HTML and markdown report with plots of the committed baselines
## and training curves (the reference's bf16 curve first, which the others
## are compared with) and of this machine's last make bench run, in
## .cache/bench/report/.
report:
	@$(GO) run ./cmd/zbench report -o $(OUT)/report baselines/*/*.txt $(wildcard $(OUT)/zbench.txt $(foreach p,$(PEERS),$(OUT)/$(p).txt)) \
		$(sort $(wildcard baselines/*/bert-train-curve/torch-bf16.jsonl)) \
		$(filter-out %/torch-bf16.jsonl,$(sort $(wildcard baselines/*/bert-train-curve/*.jsonl))) \
		| grep -E 'index.html|report.md'

## diff: the pull-request check: zbench diff BASE HEAD (default: HEAD against
## the working tree) over BENCH, COUNT passes each, interleaved.
BASE ?= HEAD
diff:
	$(GO) run ./cmd/zbench diff -bench '$(BENCH)' -count $(COUNT) $(if $(SHORT),-short) $(BASE) $(HEAD)

## calibrate: A/A runs of BENCH on this machine: false verdicts, the
## smallest detectable change and the -count to use.
calibrate:
	$(GO) run ./cmd/zbench calibrate -bench '$(BENCH)' -count $(COUNT) $(if $(SHORT),-short)

## baseline: run the suite and every peer (make bench's rounds) and
## commit-ready copy them to baselines/$(MACHINE)/, each peer's file named
## with its version.
baseline: rounds
	@mkdir -p $(BASELINE)
	cp $(OUT)/zbench.txt $(BASELINE)/zbench.txt
	@for p in $(PEERS); do f=$(OUT)/$$p.txt; grep -q '^Benchmark' $$f 2>/dev/null || continue; \
		v=$$(sed -n 's/^impl: *[a-z.]*[- ]v*\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' $$f | head -1); \
		echo "cp $$f $(BASELINE)/$$p-$$v.txt"; cp $$f $(BASELINE)/$$p-$$v.txt; done

## baseline-quick: the -short set QUICK_BASE_COUNT times, written to
## baselines/$(MACHINE)/zbench-quick.txt for make bench-quick.
baseline-quick:
	@$(MAKE) --no-print-directory quick-run BENCH=. QUICK_COUNT=$(QUICK_BASE_COUNT)
	@mkdir -p $(BASELINE)
	cp $(OUT)/zbench-quick.txt $(BASELINE)/zbench-quick.txt

## bench-engine: the CPU benchmarks the engines change (MatMul, the kernels,
## attention, BERT, ResNet and LoRA fine-tuning) on one CPU engine
## (ENGINE=onednn, openblas or purego; make bench runs the default), into
## zbench-$(ENGINE).txt.
ENGINE ?= openblas
ENGINE_BENCH ?= MatMul|Kernels|Attention|BERT|ResNet|LlamaLoRA
bench-engine: cpu-engines
	@mkdir -p $(OUT)
	ZBENCH_CPU_ENGINE=$(ENGINE) $(GO) test -run='^$$' -bench='$(ENGINE_BENCH)' -count=$(COUNT) -benchtime=$(BENCHTIME) -timeout=2h ./bench_test/ \
		| tee $(OUT)/zbench-$(ENGINE).txt
	@$(call ran,$(OUT)/zbench-$(ENGINE).txt,ENGINE_BENCH)

## profile-resnet: ResNet-50's per-layer CPU profile (each op's median and
## fastest time, FLOPs, totals by kind) at batch 1 and 8; ONNX Runtime's is in
## baselines/<machine>/ort-resnet50-profile.md (baselines/peers/onnxpeer/profile.mjs).
profile-resnet: cpu-engines
	$(GO) test ./models/resnet -run '^$$' -bench 'Profile/dev=cpu/model=resnet50/dtype=f32/batch=(1|8)$$' -benchtime 30x -v

python-ref:
	@scripts/install-python-ref.sh

## peer-test: the peers' own tests. The PyTorch peer refuses the reference
## BLAS and too few threads, runs on OpenBLAS and reports its best
## configuration; the ONNX Runtime and llama.cpp peers print zbench's names,
## refuse too few threads and match the references (each installs what it
## needs first: never skipped).
.PHONY: peer-test
peer-test: python-ref onnxruntime llamacpp tokenizer-ref
	@WITH_REFERENCE_BLAS=1 scripts/install-python-ref.sh
	@echo "== PyTorch peer: environment guard"; $(PY) baselines/peers/torch_bench_test.py
	@echo "== ONNX Runtime peer: node --test baselines/peers/onnxpeer/"; node --test baselines/peers/onnxpeer/
	@echo "== the Node peers' harness: node --test baselines/peers/node/"; node --test baselines/peers/node/
	@echo "== llama.cpp peer: node --test baselines/peers/llamacpp/"; node --test baselines/peers/llamacpp/

## golden: regenerate testdata/golden/ with the PyTorch references
## (install-python-ref.sh --golden installs python-ref's reference and, for
## imagenet.py, PIL and skimage's photographs; for chat.py, Jinja2).
golden:
	@scripts/install-python-ref.sh --golden
	$(PY) testdata/reference/kernels.py
	$(PY) testdata/reference/quant.py
	$(PY) testdata/reference/fp8.py
	$(PY) testdata/reference/llama_quant.py
	$(PY) testdata/reference/bert.py
	scripts/install-tokenizer-ref.sh --golden
	$(PY) testdata/reference/tokenizer.py
	$(PY) testdata/reference/alpaca.py
	$(PY) testdata/reference/llama.py
	$(PY) testdata/reference/gguf.py
	$(PY) testdata/reference/gpt2.py
	$(PY) testdata/reference/lora.py
	$(PY) testdata/reference/imagenet.py
	$(PY) testdata/reference/resnet.py
	$(PY) testdata/reference/chat.py

cuda-toolkit:
	@scripts/install-cuda.sh >/dev/null

## kernels: compile kernels/cuda/*.cu into kernels/cuda/ptx (committed),
## keeping each committed image the build reproduces modulo nvcc's register
## numbering, and record sources, nvcc, flags and images in ptx/_MANIFEST.
kernels: cuda-toolkit
	ZBENCH_CUDA_PREFIX=$(CUDA) scripts/build-kernels.sh

## kernels-verify: rebuild the kernels in a temporary folder and check that
## the committed images are what the sources produce, modulo nvcc's register
## numbering (about a minute; not part of make test).
kernels-verify: cuda-toolkit
	ZBENCH_CUDA_PREFIX=$(CUDA) scripts/build-kernels.sh --verify

## cuda-stub: the toolkit's link-time libcuda.so as libcuda.so.1 in
## .cache/cuda-stub, the driver the cuda-tagged binaries load without a GPU.
cuda-stub: cuda-toolkit
	@mkdir -p $(CUDA_STUB) && ln -sf $(CUDA)/usr/lib/x86_64-linux-gnu/stubs/libcuda.so $(CUDA_STUB)/libcuda.so.1

## cuda-check: with no GPU, check that the committed kernel images are what
## ptx/_MANIFEST records make kernels built from these sources (no compiling),
## test that check, and check that everything builds, vets and passes
## staticcheck with -tags cuda, and that the cuda-tagged tests pass with the
## device absent.
cuda-check: cuda-toolkit cuda-stub
	@echo "== committed kernel images match kernels/cuda/ptx/_MANIFEST"; ZBENCH_CUDA_PREFIX=$(CUDA) scripts/build-kernels.sh --check
	@echo "== the kernel-image check on planted changes"; ZBENCH_CUDA_PREFIX=$(CUDA) scripts/test-kernel-check.sh
	@echo "== go build, vet and staticcheck with -tags cuda"
	$(CUDA_ENV) $(GO) build -tags cuda ./...
	$(CUDA_ENV) $(GO) vet -tags cuda ./...
	$(CUDA_ENV) $(GO) tool staticcheck -tags cuda ./...
	@echo "== go test -tags cuda with the stub driver: the CUDA backend and the CLI; bench_test's start and tables (the GPU"
	@echo "   is absent, so the CPU is the only device: -short, and the goldens, which unit ran in full on the CPU, left out)"
	$(CUDA_ENV) LD_LIBRARY_PATH=$(CUDA_STUB) $(GO) test -tags cuda -short ./kernels/cuda/... ./cmd/...
	$(CUDA_ENV) LD_LIBRARY_PATH=$(CUDA_STUB) $(GO) test -tags cuda -short -run 'Tolerance|GoldenFile' ./bench_test/

## gpu-bin: the cuda-tagged test binaries for a GPU host, in bin/gpu:
## stripped and xz-compressed (about 18 MB for the three), each knowing the commit
## it was built from (the zbench-commit: line on a host without the
## checkout's git history); scripts/gpu-session.sh unpacks them.
gpu-bin: cuda-toolkit
	@rm -rf $(GPU_BIN) && mkdir -p $(GPU_BIN)
	@commit=$$(git rev-parse --short=12 HEAD)$$(git status --porcelain --untracked-files=no | grep -q . && echo -dirty || true); \
	for p in cuda:./kernels/cuda/ bench:./bench_test/ zbench:./cmd/zbench/; do \
		echo "go test -c -tags cuda $${p#*:} > $(GPU_BIN)/$${p%%:*}.test.xz"; \
		$(CUDA_ENV) $(GO) test -c -tags cuda -ldflags "-s -w -X github.com/zbench/zbench/zbench.buildCommit=$$commit" \
			-o $(GPU_BIN)/$${p%%:*}.test $${p#*:}; \
		xz -9 -T0 $(GPU_BIN)/$${p%%:*}.test; \
	done; \
	echo "built $(GPU_BIN)/{cuda,bench,zbench}.test.xz at $$commit ($$(du -sh $(GPU_BIN) | cut -f1)): copy the repository with bin/gpu to the GPU host and run scripts/gpu-session.sh there"

## gpu-rehearse: the GPU's verify call (scripts/gpu-verify.sh) rehearsed on
## this machine: make gpu-bin's binaries on the stub driver, the points'
## dev=cpu, within BUDGET seconds (180 here), into .cache/gpu-rehearsal;
## its summary.txt says what ran, failed and was skipped or cut.
gpu-rehearse: gpu-bin python-ref cuda-stub
	@rm -rf .cache/gpu-rehearsal
	DEV=cpu PY=$(PY) BUDGET=$(or $(BUDGET),180) LD_LIBRARY_PATH=$(CUDA_STUB) \
		scripts/gpu-session.sh verify .cache/gpu-rehearsal

