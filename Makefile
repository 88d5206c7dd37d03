# endoret — one entry point.
#   make            build build/endoret (CPU; CUDA too when nvcc is found)
#   make test       build and run the Criterion suite (CPU only; CUDA tests skip without a GPU)
#   make asan       the suite under AddressSanitizer + UBSan (slow tests skip, saying why)
#   make bench      benchmarks (figures, not pass/fail)
#   make demo       the main job: synthetic scenes -> train -> embed -> retrieval table
#   make CUDA=0|1   force the CUDA backend off/on
#   make MPI=0|1    force data-parallel training over MPI off/on (auto: mpicc or pkg-config ompi)
# Sources are found by wildcard: a new .c file in a source folder is built with no Makefile edit.

SHELL   := /bin/bash
# Build on every core unless the caller chose (-jN in MAKEFLAGS): a fresh `make test` compiled one
# file at a time before.
ifeq ($(filter -j%,$(MAKEFLAGS)),)
  MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif
CC      ?= gcc
BUILD   ?= build
ARCH    ?= -march=native
OPT     ?= -O3
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) $(ARCH) -fopenmp -I. -Wall -Wextra -Wno-unused-parameter \
           -Wno-sign-compare -MMD -MP $(EXTRA_CFLAGS)
LDLIBS  += -lpng -ljpeg -lsqlite3 -lmicrohttpd -lz -lm -ldl
LDFLAGS += -fopenmp $(EXTRA_LDFLAGS)

# ---- CUDA detection (compiles here without a GPU; runs only where one exists) ----
NVCC      ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA      ?= $(if $(NVCC),1,0)
CU_SRC    := $(wildcard kernels/cuda/*.cu)
ifeq ($(CUDA),1)
  CFLAGS    += -DENDORET_CUDA -I$(CUDA_HOME)/include
  NVCCFLAGS ?= -O3 -std=c++17 -I. -DENDORET_CUDA --expt-relaxed-constexpr \
               -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
               -gencode arch=compute_90,code=compute_90 \
               -Xcompiler -fopenmp,-Wall
  LDLIBS    += -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib -lcudart -lcublas -lcublasLt -lcudnn -lstdc++
  CU_OBJ    := $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
  # NCCL (shipped with the CUDA toolkit): GPU gradient all-reduce for data-parallel runs
  NCCL      ?= $(if $(wildcard $(CUDA_HOME)/include/nccl.h),1,0)
  ifeq ($(NCCL),1)
    NVCCFLAGS += -DENDORET_NCCL
    LDLIBS    += -lnccl
  endif
endif

# ---- MPI detection (data-parallel training, nn/base/process_group.c; NCCL on GPUs with CUDA) ----
MPICC     ?= $(shell command -v mpicc 2>/dev/null)
MPI       ?= $(if $(MPICC),1,$(shell pkg-config --exists ompi 2>/dev/null && echo 1 || echo 0))
MPI       := $(MPI)
ifeq ($(MPI),1)
  MPI_CFLAGS ?= $(if $(MPICC),$(shell $(MPICC) --showme:compile),$(shell pkg-config --cflags ompi))
  MPI_LIBS   ?= $(if $(MPICC),$(shell $(MPICC) --showme:link),$(shell pkg-config --libs ompi))
  MPI_CFLAGS := $(MPI_CFLAGS)
  MPI_LIBS   := $(MPI_LIBS)
  CFLAGS     += -DENDORET_MPI $(MPI_CFLAGS)
  LDLIBS     += $(MPI_LIBS)
endif

LIB_SRC  := $(wildcard nn/*.c nn/*/*.c kernels/*.c kernels/cpu/*.c datasets/*.c checkpoints/*.c infer/*/*.c train/*.c \
                      $(filter-out cli/main.c,$(wildcard cli/*.c)))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_OBJ)
MAIN_OBJ := $(BUILD)/cli/main.o
# tests mirror the tree; */ref/ folders hold reference generators, not tests; tests/fuzz/ holds the
# libFuzzer targets (`make fuzz`), each with its own main
TEST_SRC := $(foreach f,$(wildcard tests/*.c tests/*/*.c tests/*/*/*.c),$(if $(findstring /ref/,$(f))$(findstring /fuzz/,$(f)),,$(f)))
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)
BENCH_SRC:= $(wildcard bench/*.c)

.PHONY: all test asan bench demo demo-pgcon demo-dual kvasir-reid clean cuda-check portable-check deps layers-check fuzz fuzz-build install
all: deps $(BUILD)/endoret

# `make install` puts the one binary on PATH: $(DESTDIR)$(PREFIX)/bin/endoret (GNU conventions:
# PREFIX for where it runs from, DESTDIR for staging a package). Nothing else is installed: configs
# and scripts are read from the clone (`--config configs/...`).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
install: all
	install -d "$(DESTDIR)$(BINDIR)"
	install -m 0755 $(BUILD)/endoret "$(DESTDIR)$(BINDIR)/endoret"

# A fresh machine: install the Debian packages when any is missing (apt-get, as root or via sudo),
# so `make demo` and `make test` work from a bare clone. NO_DEPS=1 skips the check.
deps:
ifneq ($(NO_DEPS),1)
	@if command -v dpkg >/dev/null 2>&1; then bash .ci/install-deps; fi
endif

# Objects are linked directly (not through an archive) so the CLI's weak command table sees every command.
$(BUILD)/endoret: $(MAIN_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Objects depend on the flags they were built with: switching CUDA=0/1, ARCH or sanitizers in the
# same BUILD folder rebuilds instead of linking stale objects.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW   := $(CC) $(CFLAGS) $(NVCCFLAGS) CUDA=$(CUDA) MPI=$(MPI)
$(shell mkdir -p $(BUILD); echo '$(FLAGS_NOW)' | cmp -s - $(FLAGS_STAMP) || echo '$(FLAGS_NOW)' > $(FLAGS_STAMP))

$(BUILD)/%.o: %.c $(FLAGS_STAMP) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu $(FLAGS_STAMP) | deps
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/endoret_tests: $(TEST_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcriterion

# Criterion runs each test in its own process; --jobs keeps 2-core machines responsive.
TEST_JOBS ?= 2
TEST_ARGS ?=
test: deps $(BUILD)/endoret $(BUILD)/endoret_tests
	$(BUILD)/endoret_tests --jobs $(TEST_JOBS) $(TEST_ARGS)

# ASan/UBSan: separate build folder, CPU only; tests marked slow skip with a visible reason.
asan: deps
	$(MAKE) BUILD=build/asan CUDA=0 OPT="-O1 -g" EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	        EXTRA_LDFLAGS="-fsanitize=address,undefined" build/asan/endoret_tests
	@# Criterion counts a test whose child leaks at exit as passed, so the log is checked too.
	set -o pipefail; ENDORET_FAST=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  build/asan/endoret_tests --jobs $(TEST_JOBS) $(TEST_ARGS) 2>&1 | tee build/asan/test.log
	@if grep -qE "Sanitizer|runtime error" build/asan/test.log; then \
	  echo "asan: sanitizer reports in build/asan/test.log (see above)" >&2; exit 1; fi

# libFuzzer targets (tests/fuzz/fuzz_<name>.c, seeds in tests/fuzz/corpus/<name>/): built with clang
# under ASan + UBSan in build/fuzz/, each run FUZZ_SECONDS. New inputs go to build/fuzz/corpus/<name>
# (the committed seeds are only read); a crash leaves its input in build/fuzz/artifacts/.
FUZZ_SECONDS ?= 30
FUZZ_SEED    ?= 0 # 0: a new random sequence each run (exploration); CI fixes it so a failure reproduces
FUZZ_CC      ?= clang
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_WARN    := -Wno-pass-failed # clang cannot honour some of gcc's vectorisation pragmas: not a finding
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
fuzz: deps
	@if ! command -v $(FUZZ_CC) >/dev/null 2>&1; then \
	  echo "fuzz: $(FUZZ_CC) not found: fuzz targets skipped (apt-get install clang libomp-dev)"; exit 0; fi; \
	set -eo pipefail; $(MAKE) CC=$(FUZZ_CC) CUDA=0 BUILD=build/fuzz OPT="-O1 -g" EXTRA_CFLAGS="$(FUZZ_SAN) $(FUZZ_WARN) -fsanitize=fuzzer-no-link" fuzz-build; \
	mkdir -p build/fuzz/artifacts; \
	for t in $(FUZZ_NAMES); do \
	  mkdir -p build/fuzz/corpus/$$t; echo "== fuzz $$t ($(FUZZ_SECONDS) s)"; \
	  UBSAN_OPTIONS=print_stacktrace=1 build/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -seed=$(FUZZ_SEED) -timeout=10 -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix=build/fuzz/artifacts/$$t- build/fuzz/corpus/$$t tests/fuzz/corpus/$$t 2>&1 \
	    | grep -vE '^#[0-9]+.*(NEW|REDUCE|pulse)' || { echo "fuzz: $$t failed (input in build/fuzz/artifacts/)" >&2; exit 1; }; \
	done

# (inside `make fuzz`, with CC=clang BUILD=build/fuzz) the library as an archive, so each target links
# only what it reaches
fuzz-build: $(FUZZ_NAMES:%=$(BUILD)/fuzz_%)
$(BUILD)/libendoret.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/libendoret.a
	$(CC) $(LDFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

# The include graph points down the layers of docs/ARCHITECTURE.md; kernels/cpu and kernels/cuda are
# private to kernels/ (everything else goes through kernels/backend.h).
layers-check:
	python3 .ci/layers_check.py

# Compile-only check of every .cu file (CI has nvcc but no GPU).
cuda-check: deps
	@test -n "$(NVCC)" || { echo "cuda-check: nvcc not found" >&2; exit 2; }
	$(MAKE) CUDA=1 $(BUILD)/endoret
	$(BUILD)/endoret --version

# The default build is -march=native; this one targets a generic x86-64 (SSE4.2, no AVX), so code
# that dispatches to AVX2/AVX-512/AVX512_BF16 at run time must carry its own target attributes to
# compile, and the kernel and op tests run against whatever this CPU selects.
portable-check: deps
	$(MAKE) CUDA=0 BUILD=build/portable ARCH=-march=x86-64-v2 build/portable/endoret_tests
	build/portable/endoret_tests --filter 'kernels*/*'
	build/portable/endoret_tests --filter 'nn*/*'

# Figures, not pass/fail: each prints its ratio to a reference measured in the same run.
bench: deps $(BUILD)/endoret
	@# passive: our idle threads must not spin while OpenBLAS (interleaved) runs (docs/gemm.md)
	OMP_WAIT_POLICY=passive $(BUILD)/endoret bench gemm
	$(BUILD)/endoret bench search --n 1000000 --bits 64 --k 10
	$(BUILD)/endoret bench conv --batch 2 --reps 5
	$(BUILD)/endoret bench train --model vit_small --img 224 --batch 16 --threads 2
	$(BUILD)/endoret bench train --model vit_small --img 224 --batch 16 --threads 2 --precision bf16
	$(BUILD)/endoret bench train --model resnet50 --img 224 --batch 16 --threads 2
	$(BUILD)/endoret bench latency --model vit_small --img 224 --threads 2
	$(BUILD)/endoret bench latency --model vit_small --img 224 --threads 2 --precision bf16

DEMO_OUT ?= out/demo
demo: deps $(BUILD)/endoret
	DEMO_OUT=$(DEMO_OUT) sh configs/demo.sh $(BUILD)/endoret

# PGCon on synthetic frames, then 10 %-label fine-tuning from it (under 5 min on 2 idle cores; DEMO_PGCON_VARIANTS="pgcon wincon" adds WINCon): out/demo/pgcon.json, pgcon_finetune.json
demo-pgcon: deps $(BUILD)/endoret
	DEMO_OUT=$(DEMO_OUT) sh configs/demo_pgcon.sh $(BUILD)/endoret
	DEMO_OUT=$(DEMO_OUT) sh configs/demo_pgcon_finetune.sh $(BUILD)/endoret

# the dual-backbone objective on synthetic scenes: frozen vs LoRA -> $(DEMO_OUT)/dual.json (docs/dual.md)
demo-dual: deps $(BUILD)/endoret
	DEMO_OUT=$(DEMO_OUT) sh configs/demo_dual.sh $(BUILD)/endoret

# Real data: Kvasir-SEG copy detection (needs ../shared/data/kvasir_seg; ~20-25 min on 2 cores).
KVASIR_OUT ?= out/kvasir_reid
kvasir-reid: deps $(BUILD)/endoret
	KVASIR_OUT=$(KVASIR_OUT) sh configs/kvasir_reid.sh $(BUILD)/endoret

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(MAIN_OBJ:.o=.d)
