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
# The container runtimes `test-suite` runs the integration suite on
# (tests/harness: PICOLET_TEST_RUNTIME). CRI-O's crio and pinns come
# from $CRIO_ASSETS or ../shared/cri-o (see tests/harness/crio.rs).
TEST_RUNTIMES ?= containerd crio

# Debian packages, by who needs them: the build; a container runtime
# (containerd, and busybox for the test images); CRI-O's (conmon, skopeo,
# which loads the test images into its store, and crio's shared
# libraries); and the control plane's (xz for the packed binaries in
# ../shared, openssl for the test PKI). `make deps` installs them all; the
# demos install only what they run. (promtool, which checks the node's
# /metrics in tests/node_cli.rs, is not among them: Debian ships it only
# inside the prometheus server's package, whose installation enables and
# starts a server. `make promtool` unpacks just the tool.)
BUILD_PACKAGES := protobuf-compiler gcc libc6-dev
RUNTIME_PACKAGES := containerd runc containernetworking-plugins busybox-static iproute2
CRIO_PACKAGES := conmon skopeo libseccomp2 libgpgme11 libsqlite3-0 libassuan0 libgpg-error0
CLUSTER_PACKAGES := xz-utils openssl curl ca-certificates
DEB_PACKAGES := $(BUILD_PACKAGES) $(RUNTIME_PACKAGES) $(CRIO_PACKAGES) $(CLUSTER_PACKAGES)

.PHONY: all build check test test-full test-suite test-fleet fleet deps promtool images clean clean-images demo demo-cluster conformance conformance-ci bench fuzz soak

all: build

# --- build ---------------------------------------------------------------------

build:
	$(CARGO) build --release

# --- test dependencies ------------------------------------------------------------

# Idempotent: installs only the missing packages, and refreshes the apt
# lists only when something is missing.
deps:
	@bash tests/tools/debs.sh deps $(DEB_PACKAGES)

# promtool alone, unpacked from Debian's prometheus package into
# target/tools/bin (no server installed, no service started).
promtool:
	@bash tests/tools/promtool.sh $(abspath target/tools)

# OCI tarballs of the test images (see tests/images/build-images.sh): by
# default all of them, which the tests need; IMAGES picks some (the demo
# builds only busybox and pause, and not the slow grpc-health). The script
# skips work when they are up to date, and fails, naming what to install,
# when it cannot build one.
IMAGES ?= busybox pause grpc-health
images:
	bash tests/images/build-images.sh $(TEST_IMAGES) $(IMAGES)

# --- tests -----------------------------------------------------------------------

# The fast tier, first in CI: formatting, lints (all targets, warnings are
# errors) and the unit tests. A few minutes on a warm cache.
check:
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings
	$(CARGO) test --locked --lib --bins -- --test-threads=$(TEST_THREADS)

# Everything CI runs (tests/test.sh, which times each stage): `make check`
# and the integration suite on real runtimes (test-suite) in the
# foreground, and, niced in the background beside them, the release
# binaries of all shipped targets with their size checks (`make cross`),
# the board targets' unit tests under qemu-user (test-cross), and the
# qemu-x86_64 firmware image booted twice and once more with 256 MiB and
# cgroup v2 for node-pressure eviction (issue #10).
test: deps cross-deps
	bash tests/test.sh

# Each integration test runs its own runtime. SUITE_JOBS test binaries run
# at once (tests/suite.sh), each with SUITE_THREADS test threads
# (SUITE_JOBS=1: one binary after another, for a quiet machine).
SUITE_JOBS ?= 3
SUITE_THREADS ?= 2
# The unit tests' threads in `make check`.
TEST_THREADS ?= 2

# Test files that start no container runtime (the control plane harness's
# own tests, the fuzz crashers' replay) run once, not once per runtime;
# `fuzz` itself runs in `make fuzz`, `power_cuts` (the firmware image, with
# its own containerd) in `make image-test-powercut`.
RUNTIME_FREE_TESTS := control_plane fuzz_regressions
RUNTIME_TESTS := $(filter-out $(RUNTIME_FREE_TESTS) fuzz bench power_cuts fleet fleet_bench,$(basename $(notdir $(wildcard tests/*.rs))))

# The integration suite: every test file on each of TEST_RUNTIMES and the
# runtime-free ones once, several binaries at a time, with a table of each
# binary's time at the end. A test that can hold only on one runtime says so
# in its name (`..._only_on_crio`; see tests/harness/runtime.rs) and is
# skipped, by name, on the others.
test-suite: deps promtool images
	bash tests/suite.sh -j $(SUITE_JOBS) -t $(SUITE_THREADS) -r "$(TEST_RUNTIMES)" \
	  -o "$(RUNTIME_FREE_TESTS)" $(RUNTIME_TESTS)

# The fleet test (tests/fleet.rs, issue #24): `picolet-hollow` runs 20
# simulated nodes in one process against a real control plane, 200 pods
# run and are deleted; and one idle hollow node's bytes on the wire. It
# needs the `hollow` feature, so it builds on its own (the suite's picolet
# is the shipped feature set), with clippy for the feature's code first.
# The hollow nodes are a binary of their own, target/debug/picolet-hollow,
# which no build without the feature writes: CI's power-cut lane builds
# target/debug/picolet beside this stage. It starts no container runtime.
test-fleet:
	$(CARGO) clippy --locked --features hollow --lib --bins --test fleet --test fleet_bench -- -D warnings
	$(CARGO) test --locked --features hollow --test fleet -- --test-threads=2 --nocapture

# The fleet bench (tests/fleet_bench.rs, issue #24; docs/fleet.md): for
# each of FLEET_SIZES hollow nodes, a fresh control plane, then join,
# density (10 pods a node), FLEET_IDLE_SECS idle (the audit log's requests,
# wire bytes, CPU and RSS), a rolling update, and FLEET_LOSS_SECS of link
# loss for a quarter of the nodes; a table per size. The release profile
# with the feature (Cargo.toml profile.fleet).
FLEET_SIZES ?= 10 100 300 1000
FLEET_IDLE_SECS ?= 300
FLEET_LOSS_SECS ?= 60
# Upstream kubemark hollow nodes (kubelet's code over a fake runtime, one
# process each) measured first on the same harness: join, density, idle.
FLEET_KUBEMARK ?= 20
fleet: deps
	$(CARGO) build --profile fleet --features hollow --bin picolet-hollow
	PICOLET_FLEET_BENCH=1 PICOLET_HOLLOW_BIN=$(CARGO_TARGET)/fleet/picolet-hollow \
	  PICOLET_FLEET_SIZES="$(FLEET_SIZES)" PICOLET_FLEET_IDLE_SECS=$(FLEET_IDLE_SECS) \
	  PICOLET_FLEET_LOSS_SECS=$(FLEET_LOSS_SECS) PICOLET_FLEET_KUBEMARK=$(FLEET_KUBEMARK) \
	  $(CARGO) test --features hollow --test fleet_bench

# `make test`, the fuzz targets for FUZZ_SECONDS each (`make test`
# replays the corpus and every saved crasher, tests/fuzz_regressions.rs,
# but does not fuzz), the unit tests of every cross target (`make test`
# runs armv7's), the aarch64 image booted under
# emulation, 100 power cuts of the qemu-x86_64 image, the Debian
# package installed, upgraded in place and purged under systemd in a qemu
# image (image-test-package; neither in `make test`: see tests/test.sh),
# and the whole node conformance focus on picolet (`make conformance`; CI
# runs its ci-focus subset).
test-full: test
	$(MAKE) fuzz
	$(MAKE) soak
	$(MAKE) test-cross
	$(MAKE) image-test BOARD=qemu-aarch64
	$(MAKE) image-test-powercut BOARD=qemu-x86_64 POWER_CUTS=100
	$(MAKE) image-test-package BOARD=qemu-x86_64
	$(MAKE) conformance CONFORMANCE_PROFILE=dev

# The chaos soak of tests/api_chaos.rs at full length, on each of
# TEST_RUNTIMES: SOAK_SECONDS of link faults with an API server outage, a
# picolet SIGKILL and a killed container; it prints its seed, the
# convergence time after the link returns and picolet's RSS, threads and
# fds (SOAK_SEED=0x… replays a run). The suite runs it for 180 s.
SOAK_SECONDS ?= 600
soak: deps images
	for rt in $(TEST_RUNTIMES); do \
	  PICOLET_TEST_RUNTIME=$$rt PICOLET_CHAOS_SECONDS=$(SOAK_SECONDS) \
	  $(if $(SOAK_SEED),PICOLET_CHAOS_SEED=$(SOAK_SEED)) \
	  $(CARGO) test --test api_chaos a_chaos_soak -- --nocapture || exit 1; \
	done

# --- demo and bench ----------------------------------------------------------------

# Runs picolet for real: a private containerd (DEMO_RUNTIME=crio: CRI-O), the
# example static pods, and `picolet get pods` showing them running
# (examples/demo.sh). Builds only what it runs, saying so before each long
# step; cargo shows its progress.
DEMO_RUNTIME ?= containerd
demo:
	@bash tests/tools/debs.sh demo $(BUILD_PACKAGES) $(RUNTIME_PACKAGES) $(if $(filter crio cri-o,$(DEMO_RUNTIME)),$(CRIO_PACKAGES) xz-utils)
	@echo "demo: building the busybox and pause images into $(TEST_IMAGES)"
	@$(MAKE) --no-print-directory images IMAGES="busybox pause"
	@echo "demo: building picolet (cargo build --release; the first build takes a few minutes)"
	@$(MAKE) --no-print-directory build
	DEMO_IMAGES=$(abspath $(TEST_IMAGES)) bash examples/demo.sh

# Where cargo puts what it builds (CARGO_TARGET_DIR honoured), for the
# targets below that run a binary they have just built.
CARGO_TARGET := $(abspath $(or $(CARGO_TARGET_DIR),$(CURDIR)/target))

# picolet as a node of a real cluster: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler from $KUBE_ASSETS or
# ../shared/kube, a private containerd, the release picolet joined as the
# node picolet-demo with a node credential and its node API on, a
# `kubectl create deployment` running on it, and `kubectl logs` and
# `kubectl exec` through the API server (examples/demo_cluster/, on the
# integration tests' harness; tests/demo_cluster.rs runs the same steps).
# It prints the kubectl and `picolet get` commands to try. Ctrl-C cleans
# everything up; DEMO_WAIT=0 stops after `kubectl logs` and `kubectl exec`.
demo-cluster:
	@bash tests/tools/debs.sh demo-cluster $(BUILD_PACKAGES) $(RUNTIME_PACKAGES) $(CLUSTER_PACKAGES)
	@echo "demo-cluster: building the busybox and pause images into $(TEST_IMAGES)"
	@$(MAKE) --no-print-directory images IMAGES="busybox pause"
	@echo "demo-cluster: building picolet (cargo build --release)"
	@$(MAKE) --no-print-directory build
	@echo "demo-cluster: building the demo driver (cargo build --release --example demo_cluster, on the release build's dependencies)"
	$(CARGO) build --release --example demo_cluster
	PICOLET_BIN=$(CARGO_TARGET)/release/picolet PICOLET_TEST_IMAGES=$(abspath $(TEST_IMAGES)) \
	  $(CARGO_TARGET)/release/examples/demo_cluster

# Kubernetes' node conformance tests (issue #27): the e2e suite's
# `[NodeConformance]` tests (e2e.test and ginkgo from $KUBE_ASSETS or
# ../shared/kube) against a cluster whose only node is picolet
# (CONFORMANCE_NODE=kubelet: upstream kubelet, the reference), on the
# harness's control plane and a private CONFORMANCE_RUNTIME, with the
# suite's images built here (examples/conformance/). Prints `PASS|FAIL|SKIP
# name` per test and the counts, and fails on a failure that
# examples/conformance/known-failures.txt does not explain; the JUnit
# report, ginkgo's output and the node's log stay in CONFORMANCE_OUT.
# CONFORMANCE_FOCUS/SKIP override the ginkgo regexes (empty: the whole
# focus, see examples/conformance/main.rs); CONFORMANCE_PROCS tests run at
# once; CONFORMANCE_PROFILE=dev runs the debug picolet that the tests
# build, instead of the release one.
CONFORMANCE_NODE ?= picolet
CONFORMANCE_RUNTIME ?= containerd
CONFORMANCE_PROCS ?= 2
CONFORMANCE_FOCUS ?=
CONFORMANCE_SKIP ?=
CONFORMANCE_PROFILE ?= release
CONFORMANCE_OUT ?= $(CURDIR)/target/conformance/$(CONFORMANCE_NODE)
CONFORMANCE_PICOLET := $(CARGO_TARGET)/$(if $(filter dev,$(CONFORMANCE_PROFILE)),debug,release)/picolet
conformance:
	@bash tests/tools/debs.sh conformance $(BUILD_PACKAGES) $(RUNTIME_PACKAGES) $(CLUSTER_PACKAGES) $(if $(filter crio cri-o,$(CONFORMANCE_RUNTIME)),$(CRIO_PACKAGES))
	@$(MAKE) --no-print-directory images IMAGES="busybox pause"
	$(if $(filter picolet,$(CONFORMANCE_NODE)),$(CARGO) build --bin picolet $(if $(filter dev,$(CONFORMANCE_PROFILE)),,--release))
	$(CARGO) build --example conformance
	PICOLET_BIN=$(CONFORMANCE_PICOLET) PICOLET_TEST_IMAGES=$(abspath $(TEST_IMAGES)) \
	  PICOLET_TEST_RUNTIME=$(CONFORMANCE_RUNTIME) CONFORMANCE_NODE=$(CONFORMANCE_NODE) \
	  CONFORMANCE_PROCS=$(CONFORMANCE_PROCS) CONFORMANCE_OUT=$(CONFORMANCE_OUT) \
	  CONFORMANCE_FOCUS='$(CONFORMANCE_FOCUS)' CONFORMANCE_SKIP='$(CONFORMANCE_SKIP)' \
	  $(CARGO_TARGET)/debug/examples/conformance

# CI's stage (tests/test.sh): a fixed subset of fast tests that pass on
# picolet (pods, probes, downward API, configmap and secret volumes,
# emptyDir, termination messages, lifecycle hooks, init containers), on the
# debug picolet the suite built. examples/conformance/ci-focus.txt lists
# them, one ginkgo regex a line.
conformance-ci:
	CONFORMANCE_FOCUS_FILE=$(CURDIR)/examples/conformance/ci-focus.txt \
	  $(MAKE) --no-print-directory conformance CONFORMANCE_PROFILE=dev CONFORMANCE_PROCS=2 \
	  CONFORMANCE_OUT=$(CURDIR)/target/conformance/ci

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
# (profile `fuzz`; CI's short run uses FUZZ_PROFILE=dev, which has the same
# checks and reuses the test build's dependencies instead of compiling them
# all once more). Crashers land in tests/fuzz/crashers/<target>/ and are
# replayed by `cargo test` (tests/fuzz_regressions.rs). FUZZ_TARGET=a,b picks
# targets; FUZZ_SEED changes the random sequence.
FUZZ_SECONDS ?= 60
FUZZ_TARGET ?=
FUZZ_SEED ?=
FUZZ_PROFILE ?= fuzz
fuzz:
	PICOLET_FUZZ_SECONDS=$(FUZZ_SECONDS) \
	$(if $(filter dev,$(FUZZ_PROFILE)),PICOLET_FUZZ_SLOW_MS=1000) \
	$(if $(FUZZ_TARGET),PICOLET_FUZZ_TARGET=$(FUZZ_TARGET)) \
	$(if $(FUZZ_SEED),PICOLET_FUZZ_SEED=$(FUZZ_SEED)) \
	$(CARGO) test --profile $(FUZZ_PROFILE) --test fuzz

# --- housekeeping ------------------------------------------------------------------

clean-images:
	rm -rf $(TEST_IMAGES)

clean: clean-images
	$(CARGO) clean

# Cross builds, board profiles and firmware images.
include cross/cross.mk
