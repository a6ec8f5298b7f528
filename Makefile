# Makefile -- repo root. The test plumbing (deps, images, test) is owned by
# the integration test harness (tests/harness, tests/images); the other
# sections belong to whoever owns those parts of the build.
#
# CI (.ci/run) calls `make test` on a fresh machine as root, so every tool
# the tests need is installed by `make deps`, not assumed.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

CARGO ?= cargo
TEST_IMAGES ?= target/test-images
# Each integration test runs its own runtime; two at a time fits 2 cores.
TEST_THREADS ?= 2
# The container runtimes `test-host` runs the integration suite on, in
# order (tests/harness: PICOLET_TEST_RUNTIME). CRI-O's crio and pinns come
# from $CRIO_ASSETS or ../shared/cri-o (see tests/harness/crio.rs).
TEST_RUNTIMES ?= containerd crio
ALL_RUNTIMES := containerd crio

# Debian packages the build and the integration tests need. The second
# line is CRI-O's: conmon, skopeo (loads the test images into its store),
# crio's shared libraries, and xz for the packed binaries in shared/cri-o.
# prometheus: its promtool checks the node's /metrics (tests/node_cli.rs).
DEB_PACKAGES := containerd runc containernetworking-plugins busybox-static \
                protobuf-compiler gcc libc6-dev iproute2 \
                conmon skopeo libseccomp2 libgpgme11 libsqlite3-0 libassuan0 \
                libgpg-error0 xz-utils openssl curl ca-certificates prometheus

.PHONY: all build test test-full test-host test-integration deps images clean clean-images demo demo-cluster bench fuzz

all: build

# --- build ---------------------------------------------------------------------

build:
	$(CARGO) build --release

# --- test dependencies ------------------------------------------------------------

# Idempotent: installs only the missing packages, and refreshes the apt
# lists only when something is missing.
deps:
	@missing=(); \
	for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$$p"); \
	done; \
	if (( $${#missing[@]} )); then \
	  echo "deps: installing $${missing[*]}"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -q; \
	  apt-get install -y -q --no-install-recommends "$${missing[@]}"; \
	else \
	  echo "deps: all present ($(DEB_PACKAGES))"; \
	fi

# OCI tarballs of the test images (see tests/images/build-images.sh): by
# default all of them, which the tests need; IMAGES picks some (the demo
# builds only busybox and pause, and not the slow grpc-health). The script
# skips work when they are up to date, and fails, naming what to install,
# when it cannot build one.
IMAGES ?= busybox pause grpc-health
images:
	bash tests/images/build-images.sh $(TEST_IMAGES) $(IMAGES)

# --- tests -----------------------------------------------------------------------

# Everything CI runs: host tests on real parts, the unit tests of every
# board architecture under qemu-user, and one firmware image booted under
# qemu-system (x86_64; see test-full for aarch64), then booted once more
# with 256 MiB and cgroup v2 for node-pressure eviction (issue #10). That
# boot is in `make test`, not only test-full: it took 65 s of wall clock
# under TCG on the 2-core CI machine (the image is already built by then).
test: test-host
	$(MAKE) fuzz FUZZ_SECONDS=$(CI_FUZZ_SECONDS)
	$(MAKE) test-cross
	$(MAKE) image-test BOARD=qemu-x86_64
	$(MAKE) image-test-eviction BOARD=qemu-x86_64

# `make test` fuzzes each target this long (`make fuzz` alone: FUZZ_SECONDS).
CI_FUZZ_SECONDS ?= 30

# Unit tests, then the integration suite on each of TEST_RUNTIMES (real
# runtimes, cgroups, CNI), each run timed.
test-host: deps images
	$(CARGO) test --lib --bins -- --test-threads=$(TEST_THREADS)
	$(CARGO) test $(foreach t,$(RUNTIME_FREE_TESTS),--test $(t)) -- --test-threads=$(TEST_THREADS)
	@for rt in $(TEST_RUNTIMES); do \
	  $(MAKE) --no-print-directory test-integration TEST_RUNTIME=$$rt || exit 1; \
	done

# Every integration test file (tests/*.rs) on one runtime. A test that can
# hold only on one runtime says so in its name (`..._only_on_crio`; see
# tests/harness/runtime.rs) and is skipped, by name, on the others.
TEST_RUNTIME ?= containerd
# Test files that start no container runtime (the control plane harness's
# own tests, the fuzz crashers' replay) run once, not once per runtime.
RUNTIME_FREE_TESTS := control_plane fuzz fuzz_regressions
RUNTIME_TESTS := $(filter-out $(RUNTIME_FREE_TESTS),$(basename $(notdir $(wildcard tests/*.rs))))
test-integration:
	@echo "== integration tests on $(TEST_RUNTIME)"
	@start=$$(date +%s); \
	PICOLET_TEST_RUNTIME=$(TEST_RUNTIME) $(CARGO) test $(foreach t,$(RUNTIME_TESTS),--test $(t)) -- \
	  --test-threads=$(TEST_THREADS) \
	  $(foreach r,$(filter-out $(TEST_RUNTIME),$(ALL_RUNTIMES)),--skip only_on_$(r)); \
	echo "== integration tests on $(TEST_RUNTIME): passed in $$(( $$(date +%s) - start ))s"

# `make test` plus the aarch64 image booted under emulation.
test-full: test
	$(MAKE) image-test BOARD=qemu-aarch64

# --- demo and bench ----------------------------------------------------------------

# Runs picolet for real: a private containerd (DEMO_RUNTIME=crio: CRI-O), the
# example static pods, and `picolet get pods` showing them running
# (examples/demo.sh). Builds only what it runs, saying so before each long
# step; cargo shows its progress.
demo: deps
	@echo "demo: building the busybox and pause images into $(TEST_IMAGES)"
	@$(MAKE) --no-print-directory images IMAGES="busybox pause"
	@echo "demo: building picolet (cargo build --release; the first build takes a few minutes)"
	@$(MAKE) --no-print-directory build
	DEMO_IMAGES=$(abspath $(TEST_IMAGES)) bash examples/demo.sh

# picolet as a node of a real cluster: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler from $KUBE_ASSETS or
# ../shared/kube, a private containerd, the release picolet joined with a
# node credential, and `kubectl create deployment` running on it
# (examples/demo_cluster.rs, on the integration tests' harness). Ctrl-C
# cleans everything up; DEMO_WAIT=0 stops after showing the pods.
demo-cluster: deps
	@echo "demo-cluster: building the busybox and pause images into $(TEST_IMAGES)"
	@$(MAKE) --no-print-directory images IMAGES="busybox pause"
	@echo "demo-cluster: building picolet (cargo build --release)"
	@$(MAKE) --no-print-directory build
	@echo "demo-cluster: building the demo driver (cargo build --example demo_cluster)"
	$(CARGO) build --example demo_cluster
	PICOLET_BIN=$(CURDIR)/target/release/picolet PICOLET_TEST_IMAGES=$(abspath $(TEST_IMAGES)) \
	  $(CURDIR)/target/debug/examples/demo_cluster

# Footprint and speed on real parts, printed as a table (tests/bench.rs),
# of the static musl build the boards ship (BENCH_TARGET=host: the glibc one).
# Then the API-mode table (tests/bench/api.rs: a real etcd, kube-apiserver
# and containerd; Node Ready, 10 pods Running, RSS with 110 pods, the resync
# after a PICOLET_BENCH_OUTAGE_SECS=60 s outage, the aarch64 binary that
# `make cross` built); PICOLET_BENCH_API=0 skips it.
BENCH_TARGET ?= x86_64-unknown-linux-musl
bench: deps images
ifeq ($(BENCH_TARGET),host)
	PICOLET_BENCH=1 $(CARGO) test --release --test bench
else
	$(MAKE) cross-deps
	$(CARGO) build --release --target $(BENCH_TARGET) --config cross/config.toml --config cross/release.toml
	PICOLET_BENCH=1 PICOLET_BIN=$(CURDIR)/target/$(BENCH_TARGET)/release/picolet $(CARGO) test --release --test bench
endif

# --- fuzzing ---------------------------------------------------------------------

# Each fuzz target (tests/fuzz.rs: manifest, config, quantity, duration,
# pod-to-cri) for FUZZ_SECONDS, built optimised with overflow checks
# (profile `fuzz`). Crashers land in tests/fuzz/crashers/<target>/ and are
# replayed by `cargo test` (tests/fuzz_regressions.rs). FUZZ_TARGET=a,b picks
# targets; FUZZ_SEED changes the random sequence.
FUZZ_SECONDS ?= 60
FUZZ_TARGET ?=
FUZZ_SEED ?=
fuzz:
	PICOLET_FUZZ_SECONDS=$(FUZZ_SECONDS) \
	$(if $(FUZZ_TARGET),PICOLET_FUZZ_TARGET=$(FUZZ_TARGET)) \
	$(if $(FUZZ_SEED),PICOLET_FUZZ_SEED=$(FUZZ_SEED)) \
	$(CARGO) test --profile fuzz --test fuzz

# --- housekeeping ------------------------------------------------------------------

clean-images:
	rm -rf $(TEST_IMAGES)

clean: clean-images
	$(CARGO) clean

# Cross builds, board profiles and firmware images.
include cross/cross.mk
