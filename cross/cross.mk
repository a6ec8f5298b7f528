# cross/cross.mk -- owned by the cross-build work (cross/, boards/).
#
# Make targets for cross-compiling picolet, testing it under qemu-user and
# building/booting board images. Included from the top-level Makefile
# (`include cross/cross.mk`); also usable alone: `make -f cross/cross.mk cross`.
# All logic lives in the scripts next to this file so it can be run and
# debugged without make; this file only names the entry points.
#
#   make cross-deps            install the Debian packages below (idempotent)
#   make cross                 release binaries for CROSS_TARGETS + size table
#   make test-cross            `cargo test --lib` of every target under qemu-user
#   make image BOARD=rpi4      kernel + initramfs image into out/rpi4/
#   make image-test BOARD=qemu-x86_64   boot it twice under qemu-system (TCG)
#   make image-test-eviction BOARD=qemu-x86_64   boot it once with 256 MiB,
#                              cgroup v2 and a memory hog: the hog is evicted
#   make image-test-package BOARD=qemu-x86_64   the Debian package on a systemd
#                              image: dpkg -i, Type=notify, a static pod, an
#                              in-place upgrade that keeps its container,
#                              remove and purge (cross/package-test.sh)
#   make image-test-powercut BOARD=qemu-x86_64   POWER_CUTS power cuts (kill -9
#                              of qemu) during pod churn, each boot checked
#                              offline, then with the link back (tests/power_cuts.rs)
#   make install [DESTDIR=] [PREFIX=/usr] [BIN=]   the binary, the systemd
#                              unit, /etc/picolet/config.yaml (if absent) and
#                              picolet's directories (cross/install.sh)
#   make deb ARCH=arm64        a Debian package of `make cross`'s binary for
#                              ARCH (arm64 armhf riscv64 amd64) in target/deb/
#                              (cross/deb.sh)
#   make clean-board-images    remove out/ (images and the package cache);
#                              also a prerequisite of `clean-images`

CROSS_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))

# Space-separated Rust target triples; override to build a subset.
CROSS_TARGETS ?= aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf \
                 riscv64gc-unknown-linux-gnu x86_64-unknown-linux-musl
BOARD ?= qemu-x86_64
# Seconds per boot in image-test.
IMAGE_TEST_TIMEOUT ?= 300

.PHONY: install deb cross-deps cross test-cross image image-test image-test-eviction image-test-package image-test-powercut clean-images clean-board-images

cross-deps:
	bash $(CROSS_DIR)/deps.sh

# BIN: the binary to install (default target/release/picolet: `make build`).
PREFIX ?= /usr
DESTDIR ?=
BIN ?= target/release/picolet
install:
	BIN='$(BIN)' DESTDIR='$(DESTDIR)' PREFIX='$(PREFIX)' bash $(CROSS_DIR)/install.sh

# ARCH: Debian's name; the binary is `make cross`'s for it (BIN= overrides;
# DEB_VERSION= overrides Cargo.toml's version).
ARCH ?= arm64
deb:
	$(if $(filter-out target/release/picolet,$(BIN)),BIN='$(BIN)') bash $(CROSS_DIR)/deb.sh $(ARCH)

cross: cross-deps
	bash $(CROSS_DIR)/build.sh $(CROSS_TARGETS)

test-cross: cross-deps
	bash $(CROSS_DIR)/test-cross.sh $(CROSS_TARGETS)

image: cross-deps
	bash $(CROSS_DIR)/mkimage.sh $(BOARD)

image-test: image
	IMAGE_TEST_TIMEOUT=$(IMAGE_TEST_TIMEOUT) bash $(CROSS_DIR)/image-test.sh $(BOARD)

# Node-pressure eviction on a small board (issue #10): cross/image-test.sh's
# eviction scenario, one boot.
image-test-eviction: image
	IMAGE_TEST_TIMEOUT=$(IMAGE_TEST_TIMEOUT) IMAGE_TEST_SCENARIO=eviction bash $(CROSS_DIR)/image-test.sh $(BOARD)

# The Debian package under systemd (issue #25): `make deb`'s package for the
# board's architecture, and the same binary repacked with a higher version,
# installed, upgraded in place, removed and purged by dpkg in a qemu image
# whose PID 1 is Debian's systemd (out/<board>-package/), one boot.
PACKAGE_TEST_TIMEOUT ?= 420
image-test-package: cross-deps
	PACKAGE_TEST_TIMEOUT=$(PACKAGE_TEST_TIMEOUT) bash $(CROSS_DIR)/package-test.sh $(BOARD)

# Power cuts (issue #23): the image joined to a real control plane on the
# host through qemu's user network, its power cut POWER_CUTS times at seeded
# random moments (POWER_CUT_SEED); `make test-full` runs 100.
# The test binary is built first and then run alone: `cargo test` would hold
# the build directory's lock for the whole run, and CI's foreground lane
# builds its own tests there meanwhile.
POWER_CUTS ?= 3
CARGO ?= cargo
image-test-powercut: image
	bin="$$($(CARGO) test --test power_cuts --no-run --message-format=json | \
	  grep '"name":"power_cuts"' | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)" && \
	  test -n "$$bin" && POWER_CUTS=$(POWER_CUTS) "$$bin" --nocapture

# The top-level Makefile has its own `clean-images` (test images); a rule
# without a recipe only adds a prerequisite, so both cleanups run and
# neither recipe overrides the other.
clean-images: clean-board-images

clean-board-images:
	rm -rf out
