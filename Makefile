# Makefile — entry points for building, linting and testing sluice against the
# local service stack (infra/local). `make test` / `make demo` start the stack first
# (idempotent) and export its URLs (see `infra/local/services.sh env`).
SHELL := /bin/bash
SERVICES := infra/local/services.sh
LOCKED := $(if $(wildcard Cargo.lock),--locked,)

.PHONY: build prereqs services services-down test lint demo soak fuzz

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

# The correctness oracle at length (tests/oracle*): SOAK_TRIALS trials per engine, no
# time budget, SOAK_JOBS in parallel. Prints one summary line per engine.
SOAK_TRIALS ?= 500
SOAK_JOBS ?= 3
soak: services
	eval "$$($(SERVICES) env)" && SLUICE_ORACLE_TRIALS=$(SOAK_TRIALS) SLUICE_ORACLE_BUDGET_SECS=0 \
	  SLUICE_ORACLE_JOBS=$(SOAK_JOBS) cargo test $(LOCKED) --test oracle_pg -- --nocapture --exact oracle_pg

# cargo-fuzz targets (fuzz/, its own workspace), FUZZ_SECS each. libFuzzer needs a
# nightly toolchain (sanitizer flags); new inputs go to fuzz/corpus, crashes to fuzz/artifacts.
FUZZ_SECS ?= 60
FUZZ_TARGETS := pgoutput_decode pg_binary_value config_parse position_parse
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  mkdir -p corpus/$$t && cargo +nightly fuzz run -O $$t corpus/$$t seeds/$$t -- \
	    -max_total_time=$(FUZZ_SECS) -rss_limit_mb=2048 || exit 1; \
	done
