# ftllm: one Makefile.
#   make              build bin/ftllm (CPU)            make test    set up, build, run all tests
#   make run          set up, build, train inputs/system.ini on 4 ranks (DMR, SPARe, a spare,
#                     a restart); NP=1 DECK=inputs/default.ini: the one-rank deck
#   make bench        benchmarks (perf/)               make fuzz    libFuzzer on the deck parser
#   make studies      the studies (perf/studies/: CSV + PNG into build/studies/; STUDIES_QUICK=1
#                     tiny sizes, STUDIES_OUT another folder)
#   make DEBUG=1      -O0 with address+undefined sanitizers; SAN=address (or thread, ...) alone
#   make CUDA=1       bin/ftllm with the CUDA backend too (cuda/*.cu; run.backend = cuda), in
#                     build/cuda/; `make cuda-check` builds it and the GPU tests (tests/gpu/)
#   make deps         install missing Debian packages (scripts/install-deps; make test adds the
#                     test-only ones, a one-node Slurm: make deps-test)
# Variables you may set: OPT (default -O2 -march=native; -march=x86-64-v3 with CUDA=1, whose
# binary runs on a GPU node's CPU), CFLAGS_EXTRA, LDFLAGS_EXTRA, NP and DECK (make run),
# FUZZ_SECONDS, CUDA_HOME (default /usr/local/cuda), CUDA_ARCH (default 90: sm_90 code + PTX).
# Objects go to build/<variant>/, so variants never mix.

CC       := mpicc
DEBUG    ?= 0
SAN      ?=
CUDA     ?= 0
NP       ?= 4
DECK     ?= inputs/system.ini
FUZZ_SECONDS ?= 120
CUDA_HOME ?= /usr/local/cuda
CUDA_ARCH ?= 90
NVCC     := $(CUDA_HOME)/bin/nvcc
ifeq ($(origin OPT),undefined)
  OPT := -O2 $(if $(filter 0,$(CUDA)),-march=native,-march=x86-64-v3)
endif

ifeq ($(DEBUG),1)
  OPT := -O0
  SAN := address,undefined
endif
ifneq ($(CUDA),0)
  ifeq ($(wildcard $(NVCC)),)
    $(error CUDA=1: no nvcc at $(NVCC): install the CUDA toolkit or set CUDA_HOME)
  endif
endif

comma    := ,
BASE_VARIANT := $(if $(filter 1,$(DEBUG)),debug,$(if $(SAN),san-$(subst $(comma),-,$(SAN)),release))
CUDA_VARIANT := $(if $(filter release,$(BASE_VARIANT)),cuda,cuda-$(BASE_VARIANT))
VARIANT  := $(if $(filter 0,$(CUDA)),$(BASE_VARIANT),$(CUDA_VARIANT))
BUILD    := build/$(VARIANT)
SANFLAGS := $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=undefined)

PKGS     := inih hdf5-mpich papi
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# OpenBLAS, the OpenMP build (it shares OpenMP's thread pool instead of bringing a second one);
# the run path makes the loader pick it over the pthread build that libopenblas.so.0 points to.
BLAS_DIR := /usr/lib/x86_64-linux-gnu/openblas-openmp
BLAS_INC := $(firstword $(wildcard /usr/include/x86_64-linux-gnu/openblas-pthread) /usr/include/openblas)
BLAS_LIBS := -L$(BLAS_DIR) -l:libopenblas.so.0 -Wl,-rpath,$(BLAS_DIR)

CFLAGS   := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE $(OPT) -g -Wall -Wextra \
            -Wshadow -Wno-unused-parameter -fopenmp -Iinclude -I$(BLAS_INC) $(PKG_CFLAGS) \
            $(SANFLAGS) $(CFLAGS_EXTRA)
LDFLAGS  := -fopenmp $(SANFLAGS) $(LDFLAGS_EXTRA)
LDLIBS   := $(PKG_LIBS) $(BLAS_LIBS) -lm

LIB_SRC  := $(filter-out src/verbs/main.c,$(wildcard src/*.c src/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libftllm.a
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
GPU_TEST_BIN := $(patsubst tests/gpu/%.c,$(BUILD)/tests/gpu/%,$(wildcard tests/gpu/test_*.c))
TEST_HELPER := $(BUILD)/tests/ft_test.o
BENCH_SRC := $(wildcard perf/bench_*.c)
BENCH_BIN := $(BENCH_SRC:perf/%.c=$(BUILD)/perf/%)

# The CUDA backend: cuda/*.cu into the same static library, the C sources compiled with
# FTLLM_CUDA (backend_select.c then offers run.backend = cuda). --fmad=false: no multiply-add
# contraction, so elementwise kernels give the CPU's bits (cuda/cuda_common.cuh).
ifneq ($(CUDA),0)
  CU_SRC   := $(wildcard cuda/*.cu)
  CU_OBJ   := $(CU_SRC:%.cu=$(BUILD)/%.o)
  LIB_OBJ  += $(CU_OBJ)
  CFLAGS   += -DFTLLM_CUDA -I$(CUDA_HOME)/include
  NVCCFLAGS := -std=c++17 -O2 -g -lineinfo --fmad=false \
               -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) \
               -gencode arch=compute_$(CUDA_ARCH),code=compute_$(CUDA_ARCH) \
               -Iinclude -Xcompiler -Wall,-Wextra,-Wno-unused-parameter $(NVCCFLAGS_EXTRA)
  LDLIBS   += -L$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++ -ldl -Wl,-rpath,$(CUDA_HOME)/lib64
endif

.PHONY: all run test test-run test-slurm deps-test bench bench-run studies studies-run fuzz deps clean \
  inputs-doc FORCE data cuda-check
all: bin/ftllm

# Every variant links its own binary; bin/ftllm is a copy of the last one built.
$(BUILD)/ftllm: $(BUILD)/src/verbs/main.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
bin/ftllm: $(BUILD)/ftllm FORCE
	@mkdir -p bin
	@cmp -s $< $@ || cp $< $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_HELPER) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs cmocka 2>/dev/null)

$(BUILD)/perf/%: $(BUILD)/perf/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

deps:
	@scripts/install-deps
deps-test:
	@scripts/install-deps --test

# `make run` and `make test` install what is missing first, then build in a fresh make (so the
# libraries' pkg-config flags are read after the install).
run: deps
	@$(MAKE) --no-print-directory bin/ftllm
	@$(MAKE) --no-print-directory data
	mpiexec -n $(NP) bin/ftllm train $(DECK)

test: deps-test
	@$(MAKE) --no-print-directory test-run

# the e2e checks also run a sanitizer build: this one when it is one, else build/san-address
SAN_BIN := $(if $(SAN),$(BUILD)/ftllm,build/san-address/ftllm)
# Where nvcc exists the CUDA build is compiled too (a broken .cu fails the tests); its result
# goes to build/cuda/build.rc for tests/run.sh to count, and its GPU tests skip without a GPU.
HAVE_NVCC := $(if $(wildcard $(NVCC)),1)
test-run: bin/ftllm $(TEST_BIN) $(BENCH_BIN)
	@$(MAKE) --no-print-directory data
	@$(if $(SAN),,$(MAKE) --no-print-directory DEBUG=0 SAN=address build/san-address/ftllm)
	@$(if $(HAVE_NVCC),mkdir -p build/cuda && { $(MAKE) --no-print-directory CUDA=1 DEBUG=0 \
	  SAN= cuda-check > build/cuda/build.log 2>&1; echo $$? > build/cuda/build.rc; }, \
	  rm -f build/cuda/build.rc)
	@FTLLM_CUDA_BUILD=$(if $(HAVE_NVCC),build/cuda) tests/run.sh $(BUILD) $(SAN_BIN)

# The jobscripts' test alone (part of `make test`): a one-node Slurm started and stopped for it.
test-slurm: deps-test
	@$(MAKE) --no-print-directory bin/ftllm data
	@FTLLM_BUILD=$(BUILD) OMP_NUM_THREADS=1 bash tests/e2e/slurm.sh

# The CUDA build and the GPU tests, compiled only (they run on a GPU machine: perf/gpu/run.sh).
ifneq ($(CUDA),0)
cuda-check: $(BUILD)/ftllm $(GPU_TEST_BIN)
	@echo "cuda-check: $(BUILD)/ftllm and $(words $(GPU_TEST_BIN)) GPU test(s) built" \
	  "(sm_$(CUDA_ARCH) + PTX)"
else
cuda-check:
	@$(MAKE) --no-print-directory CUDA=1 DEBUG=0 SAN= cuda-check
endif

# The default token shards data/train_000.bin, data/val_000.bin (git-ignored) from a text in a
# Debian package (scripts/make-data says which and why); quick when they exist.
data: bin/ftllm
	@scripts/make-data bin/ftllm

# Benchmarks: every perf/bench_*.c is built and perf/bench.sh runs them (and perf/bench_*.sh).
# `make test` builds them too and runs each once in smoke mode (tests/e2e/bench_smoke.sh).
bench: deps
	@$(MAKE) --no-print-directory bench-run
bench-run: bin/ftllm $(BENCH_BIN)
	@perf/bench.sh $(BUILD)

# Studies: perf/studies/run.sh runs every perf/studies/*.py (benchmarks and bin/ftllm -> CSV and
# PNG plots in STUDIES_OUT); `make test` runs them in quick mode (tests/e2e/studies.sh).
STUDIES_QUICK ?= 0
STUDIES_OUT ?= build/studies
studies: deps
	@$(MAKE) --no-print-directory studies-run
studies-run: bin/ftllm $(BENCH_BIN)
	@STUDIES_QUICK=$(STUDIES_QUICK) STUDIES_OUT=$(STUDIES_OUT) perf/studies/run.sh $(BUILD)

# libFuzzer on the deck parser (clang); corpus in tests/fuzz/corpus, findings in build/fuzz/.
fuzz: deps
	@mkdir -p build/fuzz
	clang -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -g -O1 -Iinclude \
	  $(shell mpicc -show | grep -o -- '-I[^ ]*') $(PKG_CFLAGS) \
	  -fsanitize=fuzzer,address,undefined -o build/fuzz/fuzz_deck tests/fuzz/fuzz_deck.c \
	  src/deck.c $(PKG_LIBS) -lm
	build/fuzz/fuzz_deck -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
	  -artifact_prefix=build/fuzz/ tests/fuzz/corpus

# inputs/README.md is generated from the key table; `make test` checks it is current.
inputs-doc: bin/ftllm
	bin/ftllm help deck --markdown > inputs/README.md

clean:
	rm -rf build bin

FORCE:

# keep objects that chained rules would otherwise delete as intermediates
.SECONDARY:

-include $(shell find build -name '*.d' 2>/dev/null)
