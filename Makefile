# ftllm: one Makefile.
#   make              build bin/ftllm (CPU)            make test    set up, build, run all tests
#   make run          set up, build, train inputs/default.ini
#   make bench        benchmarks (perf/)               make fuzz    libFuzzer on the deck parser
#   make DEBUG=1      -O0 with address+undefined sanitizers; SAN=address (or thread, ...) alone
#   make deps         install missing Debian packages (scripts/install-deps)
# Variables you may set: OPT (default -O2 -march=native), CFLAGS_EXTRA, LDFLAGS_EXTRA, NP (ranks
# for make run), FUZZ_SECONDS. Objects go to build/<variant>/, so variants never mix.

CC       := mpicc
OPT      ?= -O2 -march=native
DEBUG    ?= 0
SAN      ?=
CUDA     ?= 0
NP       ?= 1
FUZZ_SECONDS ?= 120

ifeq ($(DEBUG),1)
  OPT := -O0
  SAN := address,undefined
endif
ifneq ($(CUDA),0)
  $(error CUDA=1: the CUDA backend (cuda/, NCCL) is not built yet; build without CUDA=1)
endif

comma    := ,
VARIANT  := $(if $(filter 1,$(DEBUG)),debug,$(if $(SAN),san-$(subst $(comma),-,$(SAN)),release))
BUILD    := build/$(VARIANT)
SANFLAGS := $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=undefined)

PKGS     := inih hdf5-mpich
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
TEST_HELPER := $(BUILD)/tests/ft_test.o
BENCH_SRC := $(wildcard perf/bench_*.c)
BENCH_BIN := $(BENCH_SRC:perf/%.c=$(BUILD)/perf/%)

.PHONY: all run test test-run bench bench-run fuzz deps clean inputs-doc FORCE data
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

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_HELPER) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs cmocka 2>/dev/null)

$(BUILD)/perf/%: $(BUILD)/perf/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

deps:
	@scripts/install-deps

# `make run` and `make test` install what is missing first, then build in a fresh make (so the
# libraries' pkg-config flags are read after the install).
run: deps
	@$(MAKE) --no-print-directory bin/ftllm
	@$(MAKE) --no-print-directory data
	mpiexec -n $(NP) bin/ftllm train inputs/default.ini

test: deps
	@$(MAKE) --no-print-directory test-run

# the e2e checks also run a sanitizer build: this one when it is one, else build/san-address
SAN_BIN := $(if $(SAN),$(BUILD)/ftllm,build/san-address/ftllm)
test-run: bin/ftllm $(TEST_BIN) $(BENCH_BIN)
	@$(MAKE) --no-print-directory data
	@$(if $(SAN),,$(MAKE) --no-print-directory DEBUG=0 SAN=address build/san-address/ftllm)
	@tests/run.sh $(BUILD) $(SAN_BIN)

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
