# Makefile — entry points for building, linting and testing sluice against the
# local service stack (infra/local). `make test` / `make demo` start the stack first
# (idempotent) and export its URLs (see `infra/local/services.sh env`).
SHELL := /bin/bash
SERVICES := infra/local/services.sh
LOCKED := $(if $(wildcard Cargo.lock),--locked,)

.PHONY: build prereqs services services-down test lint demo lambda bench bench-quick

build: prereqs
	cargo build $(LOCKED)

prereqs:
	@infra/local/prereqs.sh

services: prereqs
	$(SERVICES) up

services-down:
	$(SERVICES) down

test: services
	eval "$$($(SERVICES) env)" && cargo test $(LOCKED) --all-targets

lint: prereqs
	@cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1 \
	  || rustup component add rustfmt clippy
	cargo fmt --check && cargo clippy $(LOCKED) --all-targets -- -D warnings

demo: services
	eval "$$($(SERVICES) env)" && infra/demo/demo.sh

# The Lambda zip: target/lambda/sluice/bootstrap.zip (arm64; `make lambda ARCH=x86_64`).
ARCH ?= arm64
lambda: prereqs
	bin="$$(infra/local/cargo-lambda.sh $(ARCH))" && \
	  PATH="$$bin:$$PATH" cargo lambda build --release $(LOCKED) $(if $(filter x86_64,$(ARCH)),--x86-64,--arm64) --output-format zip
	@ls -l "$${CARGO_TARGET_DIR:-target}/lambda/sluice/bootstrap.zip"

# Benchmarks (reported, never asserted): bench/results/latest.{json,md}.
TARGET_DIR := $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),target)
bench: services
	cargo build --release $(LOCKED)
	eval "$$($(SERVICES) env)" && python3 bench/run.py --binary $(TARGET_DIR)/release/sluice \
	  $(if $(wildcard $(TARGET_DIR)/lambda/sluice/bootstrap.zip),--zip $(TARGET_DIR)/lambda/sluice/bootstrap.zip,)

# A small smoke run with the debug build, so the benchmark code keeps working (CI runs it);
# its results go to a scratch directory, not bench/results.
bench-quick: services
	cargo build $(LOCKED)
	eval "$$($(SERVICES) env)" && python3 bench/run.py --binary $(TARGET_DIR)/debug/sluice \
	  --rows 5000 --wide-rows 1000 --repeat 1 --out $$(mktemp -d)
