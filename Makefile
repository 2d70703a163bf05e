# shardc - one entry point: all, demo, test, bench, install, clean, deps
#   make V=1            show full commands
#   make SAN=address,undefined test   build into build-address-undefined/ with sanitizers
#   make SAN=thread test                ThreadSanitizer build
#   make BUILD=dir      choose the build directory

SHELL := /bin/bash
CC ?= cc
ifeq ($(origin CC),default)
CC := cc
endif
PREFIX ?= /usr/local
VERSION := 0.1.0

comma := ,
SAN ?=
ifneq ($(SAN),)
BUILD ?= build-$(subst $(comma),-,$(SAN))
SANFLAGS := -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
else
BUILD ?= build
SANFLAGS :=
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
OPT ?= -O2
# A python3 with Pillow, numpy and torch (torchvision for some tests): Debian's, when there; a
# python3 earlier on PATH may lack them
PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
# Libraries used by formats/ and compiler/ (pkg-config names). Evaluated lazily, so `make deps`
# can install them first.
PKGS := libjpeg spng zlib jansson libxxhash hdf5 lmdb liblz4 libzstd liburing libcurl
TEST_PKGS := check libpng
# Libraries of compiler/ alone (archives as inputs): its objects, and the programs and tests that
# link the compiler library; never libshardread or the Python module
COMP_PKGS := libarchive
pkgcflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
pkglibs = $(shell pkg-config --libs $(1) 2>/dev/null)
# The Debian package of each pkg-config name (scripts/deps.sh installs them all). `pkgcheck`
# runs before any compile and stops at the first name pkg-config cannot find, naming it and its
# package: pkg-config asked for the whole list at once would fail as a whole, drop every flag, and
# the compiler would then name the wrong header.
DEB_libjpeg := libjpeg62-turbo-dev
DEB_spng := libspng-dev
DEB_zlib := zlib1g-dev
DEB_jansson := libjansson-dev
DEB_libxxhash := libxxhash-dev
DEB_hdf5 := libhdf5-dev
DEB_lmdb := liblmdb-dev
DEB_liblz4 := liblz4-dev
DEB_libzstd := libzstd-dev
DEB_liburing := liburing-dev
DEB_libcurl := libcurl4-openssl-dev
DEB_check := check
DEB_libpng := libpng-dev
DEB_libarchive := libarchive-dev

CPPFLAGS += -D_GNU_SOURCE -DSHARDC_VERSION='"$(VERSION)"'
# Layering, enforced: each folder is compiled with the include paths of what it may use, so a
# wrong-way #include fails to compile. pixels/ (geometry, the resampler, warps, colour, the SIMD
# switch) sees itself and the two base headers of formats/, fmt.h (error codes, fmt_msg) and
# image.h (image buffers), through links in $(BUILD)/include/pixbase/: none of the formats'
# containers; formats/ sees itself and pixels/; remote/ (datasets at URLs:
# downloads into a local cache, checked with the formats' code) sees formats/ and itself; the
# compiler and the reader libraries see formats/, remote/, themselves and include/, where their
# public headers are (shardc.h, shardread.h), which they implement; the tests, the test tools (tests/tools/:
# shardc-mksample) and the scripts' tools see everything.
# (tests/e2e_layers.sh checks the command lines.)
PIX_BASE_H := fmt.h image.h
INC_pixels := -Ipixels -I$(BUILD)/include/pixbase
INC_formats := -Iformats -Ipixels
INC_remote := -Iformats -Ipixels -Iremote
INC_compiler := -Iformats -Ipixels -Iremote -Icompiler -Iinclude
INC_reader := -Iformats -Ipixels -Iremote -Ireader -Iinclude
INC_all := -Iformats -Ipixels -Iremote -Icompiler -Ireader -Iinclude -Iprograms \
    -Iprograms/shardbench -Itests/tools
INC = $(INC_all)
$(BUILD)/pixels/%.o: INC = $(INC_pixels)
$(BUILD)/formats/%.o: INC = $(INC_formats)
$(BUILD)/remote/%.o: INC = $(INC_remote)
$(BUILD)/compiler/%.o: INC = $(INC_compiler)
$(BUILD)/reader/%.o: INC = $(INC_reader)
# Programs (programs/: shardc, shardc-mpi, shardbench) and the Python extensions are built on the
# public headers, include/ (shardread.h, cuda_feed.h), and their own folder. Before each compile
# scripts/check-includes.sh reads the file's #include lines (and those of its folder's headers it
# includes): any other header stops the build, naming the file and line, unless it is on the
# program's INTERNAL_ list below: the internals a program still reaches for, each until the
# library offers what it needs through a public header. The Python extension of the reader
# (reader/python/) has no such list: it is compiled with -Iinclude alone.
#   shardc, shardc-mpi: none. A build, its parts and their merge, `verify`, a sample's record
#     and replay, an image written, a dataset URL resolved to its cache, the JSON strings and the
#     default augmentation of the usage text go through shardc.h; `info` and `cat` read the
#     dataset (samples, targets, masks, label maps, fields, the manifest's facts) through
#     shardread.h's shr_dataset calls.
#   shardbench: of the reader only cuda_common.h: its GPU step (cuda_step.cu) shares launch
#     helpers with the CUDA feed. The rest goes through the public headers: `compare` builds,
#     and the folder baselines list and decode their inputs as a build does, through shardc.h
#     (shc_input_list_dirs, shc_render_file); the folder feed queues its batches itself, with
#     the reader's order (shr_epoch_order), pinned buffers (shr_host_alloc) and CUDA probe from
#     shardread.h, which also reads a dataset's manifest (shr_manifest_peek) and maps the
#     memcpy baseline's samples (shr_dataset_pixels)
#   _shardwrite (compiler/python/): none. Its options go through shardc.h by flag name, its
#     items (their fields schema, targets and categories, the limits) through shardc.h's
#     streamed build (shc_stream_*)
INTERNAL_shardc :=
INTERNAL_shardbench := cuda_common.h
INTERNAL_shardwrite :=
# include paths: the public headers and the folder, then the libraries' folders whose internals
# the list allows (a reader internal only through a link in $(BUILD)/include/bench/: any other
# header of reader/ is a compile error as well)
INC_shardc := -Iinclude -Iprograms
BENCH_READER_H := cuda_common.h
INC_bench := -Iinclude -Iprograms/shardbench -I$(BUILD)/include/bench
INC_shardwrite := -Iinclude -Icompiler/python
INC_pyread := -Iinclude
check_includes = $(Q)scripts/check-includes.sh $(1) $< $(INTERNAL_$(1))
CFLAGS ?= $(OPT) -g
# -fvisibility=hidden: libshardread.so exports what shardread.h marks SHR_API and nothing else
CFLAGS += -std=c11 -fPIC -pthread -fvisibility=hidden $(WARN) $(SANFLAGS) -MMD -MP
LDFLAGS += -pthread $(SANFLAGS)
LDLIBS = $(call pkglibs,$(PKGS)) -lm

FMT_SRC := $(wildcard formats/*.c)
PIX_SRC := $(wildcard pixels/*.c)
REMOTE_SRC := $(wildcard remote/*.c)
COMP_SRC := $(wildcard compiler/*.c)
READ_SRC := $(wildcard reader/*.c)
# shardbench (programs/shardbench/): a program over the libraries, one file per concern;
# everything but its main is also linked into the tests of the training step
BENCH_SRC := $(wildcard programs/shardbench/*.c)
# shardc-mksample (tests/tools/): the test-data generator, test tooling (the tests link its
# generator, mksample.c, and its detection samples, mksample_coco.c; mksample_main.c is its
# command line)
MKSAMPLE_OBJ := $(BUILD)/tests/tools/mksample.o $(BUILD)/tests/tools/mksample_coco.o
TEST_SRC := $(wildcard tests/test_*.c)
# the pixels and remote modules travel with the formats objects: into libshardfmt.a and
# libshardread
FMT_OBJ := $(PIX_SRC:%.c=$(BUILD)/%.o) $(FMT_SRC:%.c=$(BUILD)/%.o) $(REMOTE_SRC:%.c=$(BUILD)/%.o)
COMP_OBJ := $(COMP_SRC:%.c=$(BUILD)/%.o)
READ_OBJ := $(READ_SRC:%.c=$(BUILD)/%.o)
BENCH_OBJ := $(filter-out $(BUILD)/programs/shardbench/main.o,$(BENCH_SRC:%.c=$(BUILD)/%.o))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

FMT_LIB := $(BUILD)/libshardfmt.a
COMP_LIB := $(BUILD)/libshardcomp.a
# libshardread carries the formats objects it needs, so it stands alone once installed
READ_LIB := $(BUILD)/libshardread.a
BENCH_LIB := $(BUILD)/libshardbench.a
READ_SO := $(BUILD)/libshardread.so.$(VERSION)
# The shared library's interface (SHR_VERSION_MAJOR.MINOR of shardread.h): while the major is 0 a
# minor changes it (0.3: the calls take the caller's shr_msg), so the soname carries both, and a
# program built against another 0.x header is not loaded against this one (e2e_install checks it)
SOVERSION := 0.3
READ_PC := $(BUILD)/shardread.pc
BINS := $(BUILD)/bin/shardc $(BUILD)/bin/shardc-mksample $(BUILD)/bin/shardbench
LIBS := $(READ_LIB) $(READ_SO) $(READ_PC)

.PHONY: all deps demo test check-unit check-e2e bench install clean help
all: $(BINS) $(LIBS) python

help:
	@echo "targets: all demo test bench install clean deps python"
	@echo "         (V=1, SAN=address,undefined, BUILD=dir, PYTHON=interpreter)"

deps:
	$(Q)scripts/deps.sh

.PHONY: pkgcheck
pkgcheck:
	$(Q)command -v pkg-config >/dev/null || \
	    { echo "make: pkg-config is missing: install it with scripts/deps.sh (or make deps)" >&2; exit 1; }
	$(Q)$(foreach p,$(PKGS) $(TEST_PKGS) $(COMP_PKGS),pkg-config --exists $(p) || \
	    { echo "make: pkg-config cannot find $(p) (Debian package $(or $(DEB_$(p)),unknown)): install it with scripts/deps.sh (or make deps)" >&2; exit 1; };)

# Objects are rebuilt when the compile flags change: $(FLAGS_FILE) is rewritten only when they
# differ from the last build's (e.g. -fvisibility=hidden added), and every object depends on it.
FLAGS_FILE := $(BUILD)/.cflags
FLAGS_NOW := $(CC) $(CPPFLAGS) $(CFLAGS)
ifneq ($(file <$(FLAGS_FILE)),$(FLAGS_NOW))
$(shell mkdir -p $(BUILD))
$(file >$(FLAGS_FILE),$(FLAGS_NOW))
endif

$(BUILD)/%.o: %.c $(FLAGS_FILE) | pkgcheck
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(INC) $(call pkgcflags,$(PKGS)) $(CFLAGS) -c -o $@ $<

# the programs: their includes checked first (check_includes), then compiled
SHARDC_OBJ := $(BUILD)/programs/shardc.o $(BUILD)/programs/cli.o $(BUILD)/programs/draw.o
$(SHARDC_OBJ): $(BUILD)/programs/%.o: programs/%.c $(FLAGS_FILE) scripts/check-includes.sh | pkgcheck
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(call check_includes,shardc)
	$(Q)$(CC) $(CPPFLAGS) $(INC_shardc) $(call pkgcflags,$(PKGS)) $(CFLAGS) -c -o $@ $<

$(BENCH_SRC:%.c=$(BUILD)/%.o): $(BUILD)/programs/shardbench/%.o: programs/shardbench/%.c \
    $(FLAGS_FILE) scripts/check-includes.sh | pkgcheck $(BENCH_READER_H:%=$(BUILD)/include/bench/%)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(call check_includes,shardbench)
	$(Q)$(CC) $(CPPFLAGS) $(INC_bench) $(call pkgcflags,$(PKGS)) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%.o: tests/%.c $(FLAGS_FILE) | pkgcheck
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(INC_all) $(call pkgcflags,$(PKGS) $(TEST_PKGS)) $(CFLAGS) -c -o $@ $<

# The resampler's vector helpers take 32-byte vectors by value in SSE4.1 functions; they are
# always inlined, so GCC's note that such arguments are passed differently without AVX does not
# apply (and no pragma silences it)
$(BUILD)/pixels/resample_simd.o: CFLAGS += -Wno-psabi

$(BUILD)/compiler/%.o: CFLAGS += $(call pkgcflags,$(COMP_PKGS))
COMP_LDLIBS = $(call pkglibs,$(COMP_PKGS))

$(FMT_LIB): $(FMT_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(COMP_LIB): $(COMP_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/include/pixbase/%.h: formats/%.h
	@mkdir -p $(@D)
	$(Q)ln -sf $(CURDIR)/$< $@

$(PIX_SRC:%.c=$(BUILD)/%.o): | $(PIX_BASE_H:%=$(BUILD)/include/pixbase/%)

$(BUILD)/include/bench/%.h: reader/%.h
	@mkdir -p $(@D)
	$(Q)ln -sf $(CURDIR)/$< $@

$(BENCH_LIB): $(BENCH_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(READ_LIB): $(READ_OBJ) $(FMT_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(READ_SO): $(READ_OBJ) $(FMT_OBJ)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,libshardread.so.$(SOVERSION) $(LDFLAGS) -o $@ $^ $(LDLIBS) -ldl
	$(Q)ln -sf $(notdir $@) $(BUILD)/libshardread.so

$(READ_PC): reader/shardread.pc.in Makefile
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    -e 's|@PRIVATE_LIBS@|$(strip $(LDLIBS)) -ldl -pthread|g' $< > $@

$(BUILD)/bin/shardbench: $(BUILD)/programs/shardbench/main.o $(BENCH_LIB) $(COMP_LIB) $(READ_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(COMP_LDLIBS) -ldl

# shardc reads a built dataset (info, cat) through the reader's public calls: the reader's
# archive (which carries the formats objects) is linked in
$(BUILD)/bin/shardc: $(SHARDC_OBJ) $(COMP_LIB) $(READ_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(COMP_LDLIBS) -ldl

$(BUILD)/bin/shardc-mksample: $(BUILD)/tests/tools/mksample_main.o $(MKSAMPLE_OBJ) $(FMT_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/codec-bench: $(BUILD)/scripts/codec-bench.o $(FMT_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/decode-bench: $(BUILD)/scripts/decode-bench.o $(FMT_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(BENCH_LIB) $(COMP_LIB) $(READ_LIB) $(FMT_LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(COMP_LDLIBS) $(call pkglibs,$(TEST_PKGS)) -ldl

# the generator's tests call its functions (tests/tools/mksample.c: the program's main is
# mksample_main.c)
$(BUILD)/tests/test_mksample: $(BUILD)/tests/tools/mksample.o
$(BUILD)/tests/test_roi: $(BUILD)/tests/tools/mksample.o
$(BUILD)/tests/test_part: $(BUILD)/tests/tools/mksample.o
$(BUILD)/tests/test_feed: $(BUILD)/tests/tools/mksample.o
$(BUILD)/tests/test_single: $(BUILD)/tests/tools/mksample.o
$(BUILD)/tests/test_stream: $(BUILD)/tests/tools/mksample.o
$(BUILD)/tests/test_build_options: $(BUILD)/tests/tools/mksample.o
$(BUILD)/tests/test_inspect: $(BUILD)/tests/tools/mksample.o

# `make demo` and `make test` work on a fresh machine: they install what is missing first.
demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) scripts/demo.sh

test: deps
	$(Q)$(MAKE) --no-print-directory all $(TEST_BIN)
	$(Q)$(MAKE) --no-print-directory check-unit check-e2e check-python

# the reader's tests build datasets with the CLIs of the same build
PROG_TESTS := reader transform augment_read affine detect_read reliability scale_read options_abi \
    pipeline_stats mixture
$(PROG_TESTS:%=$(BUILD)/tests/test_%): | $(BUILD)/bin/shardc $(BUILD)/bin/shardc-mksample

check-unit: $(TEST_BIN)
	$(Q)SHARDC_PYTHON=$(PYTHON) scripts/run-tests.sh unit $(TEST_BIN)

# the wheel and gpu-check load the module into a plain interpreter: tested in the plain build only
E2E_PLAIN_ONLY := tests/e2e_wheel.sh tests/e2e_gpu_check.sh
# and under TSan, not the tests of damaged and bad input and of crash points: what they add to
# the other tests is error paths, ASan+UBSan's domain, and they are about a fifth of a sanitizer
# stage's e2e minutes (202 s of 1,050 under ASan); nor the docs and dependency audits, which check
# files
E2E_NOT_TSAN := tests/e2e_damage.sh tests/e2e_crash.sh tests/e2e_bad_input.sh tests/e2e_docs.sh \
    tests/e2e_deps.sh
E2E_TESTS := $(filter-out $(if $(SAN),$(E2E_PLAIN_ONLY)) $(if $(findstring thread,$(SAN)),\
    $(E2E_NOT_TSAN)),$(wildcard tests/e2e_*.sh))
check-e2e: $(BINS) $(if $(SAN),,$(BUILD)/tests/test_cuda)
	$(Q)SHARDC_PYTHON=$(PYTHON) BUILD=$(BUILD) scripts/run-tests.sh e2e $(E2E_TESTS)

bench: deps
	$(Q)scripts/deps.sh --bench
	$(Q)$(MAKE) --no-print-directory all $(BUILD)/bin/decode-bench
	$(Q)BUILD=$(BUILD) scripts/bench-build.sh
	$(Q)BUILD=$(BUILD) scripts/bench-read.sh
	$(Q)BUILD=$(BUILD) scripts/bench-formats.sh
	$(Q)BUILD=$(BUILD) $(PYTHON) scripts/bench-rrc.py
	$(Q)BUILD=$(BUILD) $(PYTHON) scripts/bench-writer.py
	$(Q)BUILD=$(BUILD) scripts/bench-direct.sh
	$(Q)$(MAKE) --no-print-directory bench-torch


# ---- fuzzing (tests/fuzz/README.md) ----
#   make fuzz                  libFuzzer targets (clang, ASan + UBSan): $(FUZZ_BUILD)/fuzz/fuzz_NAME
#   make fuzz-seeds            seed corpora $(BUILD)/fuzz/corpus/NAME/, made with this build's CLIs
#   make fuzz-run SECONDS=N    each target N seconds (default 60) on its seeds and regressions
#   make fuzz-replay           each target over its seeds and regressions without libFuzzer, built
#                              with $(CC) and SAN (e.g. make SAN=address,undefined fuzz-replay)
#   FUZZ="raw png"             limits fuzz-run and fuzz-replay to these targets
FUZZ_BUILD ?= $(BUILD)-fuzz
FUZZ_CC ?= clang
FUZZ_SANFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
    -fno-sanitize-recover=all
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ ?= $(FUZZ_NAMES)
SECONDS ?= 60
FUZZ_COMMON := $(BUILD)/tests/fuzz/common.o
FUZZ_SEEDS := $(BUILD)/fuzz/corpus/.done

.PHONY: fuzz fuzz-targets fuzz-seeds fuzz-run fuzz-replay
.SECONDARY: $(FUZZ_NAMES:%=$(BUILD)/tests/fuzz/fuzz_%.o) $(FUZZ_COMMON) $(BUILD)/tests/fuzz/replay.o

# the whole library is rebuilt with clang and coverage instrumentation in a build directory of its
# own, since the flags differ from every other build
fuzz:
	$(Q)scripts/deps.sh --fuzz
	$(Q)$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) FUZZ_BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) \
	    SAN= SANFLAGS='$(FUZZ_SANFLAGS)' fuzz-targets

fuzz-targets: $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
	@:

$(BUILD)/fuzz/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_COMMON) $(COMP_LIB) $(FMT_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS) $(COMP_LDLIBS)

$(BUILD)/fuzz/replay_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/replay.o $(FUZZ_COMMON) \
                        $(COMP_LIB) $(FMT_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(COMP_LDLIBS)

fuzz-seeds: $(FUZZ_SEEDS)

$(FUZZ_SEEDS): tests/fuzz/make-seeds.sh $(BUILD)/bin/shardc $(BUILD)/bin/shardc-mksample
	$(Q)BUILD=$(BUILD) tests/fuzz/make-seeds.sh $(BUILD)/fuzz/corpus

fuzz-run: fuzz $(FUZZ_SEEDS)
	$(Q)tests/fuzz/run.sh fuzz $(FUZZ_BUILD)/fuzz $(BUILD)/fuzz/corpus $(SECONDS) $(FUZZ)

fuzz-replay: $(FUZZ:%=$(BUILD)/fuzz/replay_%) $(FUZZ_SEEDS)
	$(Q)tests/fuzz/run.sh replay $(BUILD)/fuzz $(BUILD)/fuzz/corpus 0 $(FUZZ)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	    $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(READ_LIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(READ_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf $(notdir $(READ_SO)) $(DESTDIR)$(PREFIX)/lib/libshardread.so.$(SOVERSION)
	ln -sf $(notdir $(READ_SO)) $(DESTDIR)$(PREFIX)/lib/libshardread.so
	install -m 644 include/shardread.h include/shardc.h $(DESTDIR)$(PREFIX)/include/
	install -d $(DESTDIR)$(PREFIX)/include/shardread
	install -m 644 include/shardread/*.h $(DESTDIR)$(PREFIX)/include/shardread/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    -e 's|@PRIVATE_LIBS@|$(strip $(LDLIBS)) -ldl -pthread|g' reader/shardread.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/shardread.pc

# ---- the Python package (reader/python/shardread/): $(PY_PKG), for $(PYTHON) ----
#   make python           just the package:
#                         PYTHONPATH=$(BUILD)/python $(PYTHON) -c 'import shardread'
#   make check-python     its pytest suite (tests/python/); under SAN=address it runs with libasan
#                         preloaded into the interpreter (tests/python/run.sh)
#   make wheel            build/dist/shardread-$(VERSION)-cp311-abi3-linux_x86_64.whl: the package
#                         with every shared library it needs, and shardc and shardc-mksample as
#                         console scripts (scripts/wheel.py); prints the wheel's figures (glibc
#                         needed, bundled libraries, size)
# The C extension _shardread uses CPython's stable ABI (Py_LIMITED_API 3.11) and no numpy C API,
# so one binary serves every CPython >= 3.11 with numpy 1 or 2; the pure-Python layer
# (shardread/__init__.py) makes the arrays. It links libshardread.a into the extension (symbols
# kept private) and sees only the public headers (include/: shardread.h).
# PYTHON (set at the top): Debian's interpreter, which has numpy and torch.
PY_PKG := $(BUILD)/python/shardread
PY_SO := $(PY_PKG)/_shardread.abi3.so
# the writer (shardread.build): the compiler's pipeline, in its own extension
# (compiler/python/_shardwrite.c), built like a program: the public headers (shardc.h) and its
# folder, nothing of formats/, compiler/ or the reader (INTERNAL_shardwrite is empty)
PY_WSO := $(PY_PKG)/_shardwrite.abi3.so
PY_FILES := $(patsubst reader/python/shardread/%,$(PY_PKG)/%,$(wildcard reader/python/shardread/*))
# where `make install` puts the package: the interpreter's own place for locally installed
# packages (Debian: /usr/local/lib/python3.X/dist-packages)
PY_SITE ?= $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
py_includes = $(shell $(PYTHON) -c 'import sysconfig; print("-I" + sysconfig.get_paths()["include"])')

.PHONY: python check-python install-python print-read-libs print-comp-libs bench-torch wheel
python: $(PY_SO) $(PY_WSO) $(PY_FILES)

# the extension's files: _shardread.c and its parts _sr_*.c (their private header: _sr.h)
PY_EXT_OBJ := $(patsubst reader/python/%.c,$(BUILD)/python/%.o,\
    $(wildcard reader/python/_shardread.c reader/python/_sr_*.c))
$(PY_EXT_OBJ): $(BUILD)/python/%.o: reader/python/%.c $(FLAGS_FILE)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) -D_GNU_SOURCE $(INC_pyread) $(py_includes) $(CFLAGS) -fvisibility=hidden -c -o $@ $<

$(PY_SO): $(PY_EXT_OBJ) $(READ_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,--exclude-libs,ALL -o $@ $^ $(LDLIBS) -ldl

$(BUILD)/python/_shardwrite.o: compiler/python/_shardwrite.c $(FLAGS_FILE) scripts/check-includes.sh \
                               | pkgcheck
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(call check_includes,shardwrite)
	$(Q)$(CC) $(CPPFLAGS) $(INC_shardwrite) $(call pkgcflags,$(PKGS)) $(py_includes) $(CFLAGS) -c -o $@ $<

$(PY_WSO): $(BUILD)/python/_shardwrite.o $(COMP_LIB) $(FMT_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,--exclude-libs,ALL -o $@ $^ $(LDLIBS) $(COMP_LDLIBS)

$(PY_PKG)/%: reader/python/shardread/%
	@mkdir -p $(@D)
	$(Q)cp $< $@

WHEEL := $(BUILD)/dist/shardread-$(VERSION)-cp311-abi3-linux_x86_64.whl
# the figures (glibc, bundled libraries, size) are printed on every make wheel, built or not
wheel: $(WHEEL)
	@cat $(WHEEL).figures
WHEEL_PROGRAMS := $(BUILD)/bin/shardc $(BUILD)/bin/shardc-mksample
$(WHEEL): $(PY_SO) $(PY_WSO) $(PY_FILES) $(WHEEL_PROGRAMS) scripts/wheel.py
	$(Q)$(PYTHON) scripts/wheel.py --version $(VERSION) --package $(PY_PKG) --out $@ \
	    $(addprefix --program ,$(WHEEL_PROGRAMS)) >/dev/null

# the link flags of libshardread.a's dependencies (reader/python/setup.py asks for them)
print-read-libs:
	@echo $(LDLIBS) -ldl -pthread
# and those of the writer's extension: libshardcomp.a and libshardfmt.a's (setup.py too)
print-comp-libs:
	@echo $(LDLIBS) $(COMP_LDLIBS) -pthread

check-python: $(PY_SO) $(PY_WSO) $(BINS)
	$(Q)BUILD=$(BUILD) PYTHON=$(PYTHON) SAN=$(SAN) CC=$(CC) tests/python/run.sh

# shardread.Loader against torchvision / memmap / h5py DataLoaders and the C reader, plus a small
# CPU training loop fed by each (scripts/bench-torch.py)
bench-torch: $(PY_SO) $(BINS)
	$(Q)scripts/deps.sh --bench
	$(Q)BUILD=$(BUILD) PYTHONPATH=$(BUILD)/python $(PYTHON) scripts/bench-torch.py

install: install-python
install-python: $(PY_SO) $(PY_WSO) $(PY_FILES)
	$(Q)dir='$(PY_SITE)' && install -d "$(DESTDIR)$$dir/shardread" && \
	    install -m 644 $(PY_SO) $(PY_WSO) $(PY_FILES) "$(DESTDIR)$$dir/shardread/" && \
	    echo "installed shardread for $(PYTHON) in $(DESTDIR)$$dir"

# ---- shardc-mpi: shardc build under mpirun, built where Open MPI's (or any) mpicc is found ----
# MPICC=/path/to/mpicc to choose; MPICC= to leave it out. It links shardc's build command line
# (programs/cli.c: the same build options) and the compiler's libraries.
ifeq ($(origin MPICC),undefined)
MPICC := $(shell command -v mpicc 2>/dev/null)
endif
ifneq ($(MPICC),)
MPI_BIN := $(BUILD)/bin/shardc-mpi
BINS += $(MPI_BIN)
all: $(MPI_BIN)

$(BUILD)/programs/shardc-mpi.o: programs/shardc-mpi.c $(FLAGS_FILE) scripts/check-includes.sh
	@mkdir -p $(@D)
	@$(if $(Q),echo "  MPICC   $<")
	$(call check_includes,shardc)
	$(Q)OMPI_CC=$(CC) MPICH_CC=$(CC) $(MPICC) $(CPPFLAGS) $(INC_shardc) \
	    $(call pkgcflags,$(PKGS)) $(CFLAGS) -c -o $@ $<

$(MPI_BIN): $(BUILD)/programs/shardc-mpi.o $(BUILD)/programs/cli.o $(COMP_LIB) $(FMT_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  MPILD   $@")
	$(Q)OMPI_CC=$(CC) MPICH_CC=$(CC) $(MPICC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(COMP_LDLIBS)
else
$(info mpicc not found: shardc-mpi is not built; scripts/deps.sh installs Open MPI)
endif

# ---- the CUDA feed, $(BUILD)/lib/libshardgpu.so, and shardbench's GPU step ----
# Built where nvcc is found (NVCC=/path/to/nvcc to choose). Nothing else links against CUDA:
# libshardgpu.so is the CUDA feed (reader/cuda_feed.cu, include/cuda_feed.h: a library of the
# project, installed), and libshardbench-gpu.so the GPU half of shardbench's training step
# (programs/shardbench/cuda_step.cu: the benchmark's own, not installed as a library: `make
# install` puts it in PREFIX/lib/shardbench/, where only shardbench looks). shardbench opens it at
# run time (programs/shardbench/gpu_api.h) and falls back to the CPU step without it, a driver or a device. Code
# for sm_90 plus compute_90 PTX, which newer GPUs JIT; e.g.
# NVCC_ARCH='-gencode arch=compute_80,code=sm_80 ...' adds older ones.
ifeq ($(origin NVCC),undefined)
NVCC := $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
endif
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCCFLAGS ?= -O2 -g
NVCC_WARN := -Xcompiler -Wall,-Wextra,-Wshadow
CUDA_LIBDIR ?= $(firstword $(wildcard $(dir $(NVCC))../lib64 $(dir $(NVCC))../lib))
GPU_SO := $(BUILD)/lib/libshardgpu.so
GPU_STEP_SO := $(BUILD)/lib/libshardbench-gpu.so
# RUNPATH: $ORIGIN (a bundle, scripts/gpu-bundle.sh, keeps the CUDA libraries next to them; the
# step finds libshardgpu.so beside it in the build, one folder up once installed), then CUDA's
GPU_RPATH = -Xlinker --enable-new-dtags,-rpath,'$$ORIGIN$(1)'$(if $(CUDA_LIBDIR),:$(CUDA_LIBDIR))

ifneq ($(NVCC),)
.PHONY: gpu install-gpu
all: $(GPU_SO) $(GPU_STEP_SO)
gpu: $(GPU_SO) $(GPU_STEP_SO)

$(BUILD)/reader/%.cu.o: reader/%.cu
	@mkdir -p $(@D)
	@$(if $(Q),echo "  NVCC    $<")
	$(Q)$(NVCC) -std=c++17 $(NVCC_ARCH) $(NVCCFLAGS) -Xcompiler -fPIC,-fvisibility=hidden \
	    $(NVCC_WARN) $(CPPFLAGS) $(INC_reader) -MMD -MP -MF $(@:.o=.d) -MT $@ -c -o $@ $<

$(BUILD)/programs/shardbench/cuda_step.cu.o: $(BUILD)/programs/shardbench/%.cu.o: \
    programs/shardbench/%.cu scripts/check-includes.sh | $(BENCH_READER_H:%=$(BUILD)/include/bench/%)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  NVCC    $<")
	$(call check_includes,shardbench)
	$(Q)$(NVCC) -std=c++17 $(NVCC_ARCH) $(NVCCFLAGS) -Xcompiler -fPIC,-fvisibility=hidden \
	    $(NVCC_WARN) $(CPPFLAGS) $(INC_bench) -MMD -MP -MF $(@:.o=.d) -MT $@ -c -o $@ $<

$(GPU_SO): $(BUILD)/reader/cuda_feed.cu.o
	@mkdir -p $(@D)
	@$(if $(Q),echo "  NVLD    $@")
	$(Q)$(NVCC) -shared $(NVCC_ARCH) -cudart shared -o $@ $^ $(call GPU_RPATH,)

$(GPU_STEP_SO): $(BUILD)/programs/shardbench/cuda_step.cu.o $(GPU_SO)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  NVLD    $@")
	$(Q)$(NVCC) -shared $(NVCC_ARCH) -cudart shared -o $@ $< -L$(@D) -lshardgpu -lcublas \
	    $(call GPU_RPATH,:$$ORIGIN/..)

# the GPU tests load them from $(BUILD)/lib (they pass, skipped, without them)
$(BUILD)/tests/test_cuda: | $(GPU_SO) $(GPU_STEP_SO)

install: install-gpu
install-gpu: $(GPU_SO) $(GPU_STEP_SO)
	install -d $(DESTDIR)$(PREFIX)/lib/shardbench $(DESTDIR)$(PREFIX)/include
	install -m 755 $(GPU_SO) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(GPU_STEP_SO) $(DESTDIR)$(PREFIX)/lib/shardbench/
	install -m 644 include/cuda_feed.h $(DESTDIR)$(PREFIX)/include/
else
$(info nvcc not found: libshardgpu.so (the CUDA feed) and shardbench's GPU step are not built; NVCC=/path/to/nvcc builds them)
endif

clean:
	rm -rf build build-*

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
