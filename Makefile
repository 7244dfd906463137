# Makefile — entry points for building, linting and testing sluice against the
# local service stack (infra/local). `make test` / `make demo` start the stack first
# (idempotent) and export its URLs (see `infra/local/services.sh env`).
SHELL := /bin/bash
SERVICES := infra/local/services.sh
LOCKED := $(if $(wildcard Cargo.lock),--locked,)

.PHONY: build prereqs services services-down test lint demo lambda bench bench-quick terraform-check soak fuzz

build: prereqs
	cargo build $(LOCKED)

prereqs:
	@infra/local/prereqs.sh

services: prereqs
	$(SERVICES) up

services-down:
	$(SERVICES) down

# cli::terraform needs the Terraform tools (terraform-tools.sh is a no-op once installed).
# The live SQL Server suite is #[ignore]d (no SQL Server on the project's machines); it
# runs too, with --ignored, when SLUICE_TEST_MSSQL_URL names a server.
test: services
	@infra/local/terraform-tools.sh >/dev/null
	eval "$$($(SERVICES) env)" && cargo test $(LOCKED) --all-targets
	@if [ -n "$${SLUICE_TEST_MSSQL_URL:-}" ]; then \
	  echo "cargo test $(LOCKED) --test integration -- --ignored mssql::live::"; \
	  cargo test $(LOCKED) --test integration -- --ignored mssql::live::; \
	fi

# The fuzz targets (fuzz/, its own workspace) are type-checked on the stable toolchain:
# only running them needs nightly (`make fuzz`).
lint: prereqs terraform-check
	@cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1 \
	  || rustup component add rustfmt clippy
	cargo fmt --check && cargo clippy $(LOCKED) --all-targets -- -D warnings
	cargo check --manifest-path fuzz/Cargo.toml $(if $(wildcard fuzz/Cargo.lock),--locked,) --bins

demo: services
	eval "$$($(SERVICES) env)" && infra/demo/demo.sh

# The Lambda zip: target/lambda/sluice/bootstrap.zip (arm64; `make lambda ARCH=x86_64`).
ARCH ?= arm64
lambda: prereqs
	bin="$$(infra/local/cargo-lambda.sh $(ARCH))" && \
	  PATH="$$bin:$$PATH" cargo lambda build --release $(LOCKED) $(if $(filter x86_64,$(ARCH)),--x86-64,--arm64) --output-format zip
	@ls -l "$${CARGO_TARGET_DIR:-target}/lambda/sluice/bootstrap.zip"

# Benchmarks (reported, never asserted): bench/results/latest.{json,md} and history.md —
# PostgreSQL and MariaDB, each scenario against the source's own floors, with CPU and
# (callgrind, scenarios up to 200k rows) instructions per row (bench/run.py); then a table
# after 1,500 small runs before and after `sluice compact` (bench/compaction.py); then one
# incremental `sluice materialize` on a 10k- and a 1M-row table, plain and with its Iceberg
# table (bench/current_state.py);
# then a full and a 1% `sluice verify` of a 1M-row table (bench/verify.py).
# BENCH_ARGS passes more options, e.g. BENCH_ARGS='--repeat 5 --note "quiet machine"'.
TARGET_DIR := $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),target)
BENCH_ARGS ?=
# bench/compaction.py: files and the current-state query before and after `sluice compact`.
COMPACTION_BENCH_ARGS ?=
bench: services
	@infra/local/prereqs.sh valgrind
	cargo build --release $(LOCKED)
	eval "$$($(SERVICES) env)" && python3 bench/run.py --binary $(TARGET_DIR)/release/sluice \
	  $(if $(wildcard $(TARGET_DIR)/lambda/sluice/bootstrap.zip),--zip $(TARGET_DIR)/lambda/sluice/bootstrap.zip,) $(BENCH_ARGS)
	eval "$$($(SERVICES) env)" && python3 bench/compaction.py --binary $(TARGET_DIR)/release/sluice $(COMPACTION_BENCH_ARGS)
	eval "$$($(SERVICES) env)" && python3 bench/current_state.py --binary $(TARGET_DIR)/release/sluice
	eval "$$($(SERVICES) env)" && python3 bench/current_state.py --binary $(TARGET_DIR)/release/sluice --iceberg
	eval "$$($(SERVICES) env)" && python3 bench/verify.py --binary $(TARGET_DIR)/release/sluice

# A small smoke run with the debug build, so the benchmark code keeps working (CI runs it);
# its results go to a scratch directory, not bench/results.
bench-quick: services
	@infra/local/prereqs.sh valgrind
	cargo build $(LOCKED)
	eval "$$($(SERVICES) env)" && python3 bench/run.py --binary $(TARGET_DIR)/debug/sluice \
	  --rows 5000 --wide-rows 1000 --idle-rows 1000 --instructions-max-rows 1000 --repeat 1 \
	  --out $$(mktemp -d) $(BENCH_ARGS)
	eval "$$($(SERVICES) env)" && python3 bench/compaction.py --binary $(TARGET_DIR)/debug/sluice \
	  --runs 20 --repeat 2 --out $$(mktemp -d) $(COMPACTION_BENCH_ARGS)
	eval "$$($(SERVICES) env)" && python3 bench/current_state.py --binary $(TARGET_DIR)/debug/sluice \
	  --sizes 1000,5000 --changes 10 --rounds 1 --out $$(mktemp -d)
	eval "$$($(SERVICES) env)" && python3 bench/current_state.py --binary $(TARGET_DIR)/debug/sluice \
	  --sizes 1000,5000 --changes 10 --rounds 1 --iceberg --out $$(mktemp -d)
	eval "$$($(SERVICES) env)" && python3 bench/verify.py --binary $(TARGET_DIR)/debug/sluice \
	  --sizes 50000 --out $$(mktemp -d)

# Offline checks of terraform/ (no provider download, so no validate/plan): fmt with the
# PyPI-shipped Terraform 1.0.3, a python-hcl2 parse of every file (checkov exits 0 on a
# parse error), checkov with zero failed checks. tests/cli/terraform.rs renders the example's
# configs and checks them with the binary.
terraform-check:
	@bin="$$(infra/local/terraform-tools.sh)" && \
	  "$$bin/terraform" fmt -check -recursive -diff terraform && \
	  "$$bin/hcl2-python" terraform/tests/parse_all.py terraform && \
	  "$$bin/hcl2-python" terraform/tests/readme_tables.py --check terraform/modules && \
	  "$$bin/checkov" -d terraform --framework terraform --skip-download --quiet --compact

# The correctness oracle at length (tests/oracle, the `oracle` case of the source
# conformance suite): SOAK_TRIALS trials per engine (PostgreSQL 15 and 18, MariaDB), no
# time budget, SOAK_JOBS in parallel. Prints one summary line per engine.
SOAK_TRIALS ?= 500
SOAK_JOBS ?= 3
soak: services
	eval "$$($(SERVICES) env)" && for engine in postgres postgres18 mysql; do \
	  SLUICE_ORACLE_TRIALS=$(SOAK_TRIALS) SLUICE_ORACLE_BUDGET_SECS=0 SLUICE_ORACLE_JOBS=$(SOAK_JOBS) \
	    cargo test $(LOCKED) --test integration -- --nocapture --exact conformance::source::$$engine::oracle || exit 1; \
	done

# cargo-fuzz targets (fuzz/, its own workspace), FUZZ_SECS each. libFuzzer needs a
# nightly toolchain (sanitizer flags); new inputs go to fuzz/corpus, crashes to fuzz/artifacts.
FUZZ_SECS ?= 60
FUZZ_TARGETS := pgoutput_decode pg_binary_value config_parse position_parse mysql_binlog_cell mysql_binlog_rows
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  mkdir -p corpus/$$t && cargo +nightly fuzz run -O $$t corpus/$$t seeds/$$t -- \
	    -max_total_time=$(FUZZ_SECS) -rss_limit_mb=2048 || exit 1; \
	done
