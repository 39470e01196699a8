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
BENCHTIME ?= 1s
BENCH     ?= .
BENCHSTAT := $(GO) tool benchstat -table ""

export GOTOOLCHAIN := local

.PHONY: test lint unit race bench-smoke bench bench-quick benchcmp tables \
	bench-run peer-run baseline golden python-ref bench-openblas

## test: formatting, vet, staticcheck, unit and golden tests, the race
## detector on the harness, and one quick pass over every benchmark.
test: lint unit race bench-smoke

lint:
	@echo "== gofmt"; out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "not gofmt-ed:"; echo "$$out"; exit 1; fi
	@echo "== go vet"; $(GO) vet ./...
	@echo "== staticcheck"; $(GO) tool staticcheck ./...
	@echo "== vet and staticcheck with -tags openblas"; $(GO) vet -tags openblas ./kernels/cpu/ && $(GO) tool staticcheck -tags openblas ./kernels/cpu/

unit:
	@echo "== go test"; $(GO) test ./...

race:
	@echo "== go test -race (harness, pool)"; $(GO) test -race ./zbench/... ./kernels/mempool/...

bench-smoke:
	@echo "== one -short pass over every benchmark"
	$(GO) test -short -run='^$$' -bench=. -benchtime=1x ./...

## bench: the full suite and the PyTorch peer on this machine, each
## benchmark COUNT times, then benchstat against the committed baseline and
## against the peer.
bench: bench-run peer-run tables

## benchcmp: the same runs, printing only the benchstat tables.
benchcmp:
	@$(MAKE) --no-print-directory bench-run peer-run QUIET=1
	@$(MAKE) --no-print-directory tables

## bench-quick: the -short set once, against the committed baseline.
bench-quick:
	@mkdir -p $(OUT)
	$(GO) test -short -run='^$$' -bench='$(BENCH)' -count=1 ./bench_test/ | tee $(OUT)/zbench.txt
	@$(MAKE) --no-print-directory tables NOPEER=1

bench-run:
	@mkdir -p $(OUT)
	@echo "== zbench: go test -bench='$(BENCH)' -count=$(COUNT) -benchtime=$(BENCHTIME) ./bench_test/ > $(OUT)/zbench.txt"
	$(GO) test -run='^$$' -bench='$(BENCH)' -count=$(COUNT) -benchtime=$(BENCHTIME) -timeout=2h ./bench_test/ \
		| if [ -n "$${QUIET:-}" ]; then cat > $(OUT)/zbench.txt; else tee $(OUT)/zbench.txt; fi

peer-run: python-ref
	@mkdir -p $(OUT)
	@echo "== PyTorch peer: baselines/peers/torch_bench.py --count $(COUNT) > $(OUT)/torch.txt"
	$(PY) baselines/peers/torch_bench.py --count $(COUNT) --benchtime $(BENCHTIME) --bench '$(BENCH)' \
		| if [ -n "$${QUIET:-}" ]; then cat > $(OUT)/torch.txt; else tee $(OUT)/torch.txt; fi

tables:
	@if [ -f $(BASELINE)/zbench.txt ]; then \
		echo; echo "== benchstat: committed baseline $(BASELINE)/zbench.txt vs this run"; \
		$(BENCHSTAT) baseline=$(BASELINE)/zbench.txt this-run=$(OUT)/zbench.txt; \
	else echo "== no committed baseline for machine $(MACHINE) (baselines/*/): run make baseline"; fi
	@if [ -z "$${NOPEER:-}" ]; then \
		echo; echo "== benchstat: PyTorch peer vs zbench, same machine, same run"; \
		$(BENCHSTAT) torch=$(OUT)/torch.txt zbench=$(OUT)/zbench.txt; fi

## baseline: run the suite and the peer and commit-ready copy them to
## baselines/$(MACHINE)/.
baseline: bench-run peer-run
	@mkdir -p $(BASELINE)
	cp $(OUT)/zbench.txt $(BASELINE)/zbench.txt
	cp $(OUT)/torch.txt $(BASELINE)/torch-$$($(PY) -c 'import torch; print(torch.__version__.split("a")[0].rsplit(".", 1)[0])').txt

## bench-openblas: BenchmarkMatMul with OpenBLAS behind gonum's blas32.
bench-openblas:
	@scripts/install-openblas.sh
	@mkdir -p $(OUT)
	$(GO) test -tags openblas -run='^$$' -bench='MatMul' -count=$(COUNT) -benchtime=$(BENCHTIME) -timeout=2h ./bench_test/ \
		| tee $(OUT)/zbench-openblas.txt

python-ref:
	@scripts/install-python-ref.sh

## golden: regenerate testdata/golden/*.safetensors with the PyTorch reference.
golden: python-ref
	$(PY) testdata/reference/kernels.py
