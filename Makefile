# Quickstart:
#   make test    environment, static checks, whole test suite (what CI runs)
#   make demo    a real local cluster: tier a topic, disable it (delete policy), re-enable it
# Also: make lint | bench | proto | soak (the randomized run for TIERED_SOAK_SECONDS=N, default 300 per mode; TIERED_SOAK_SEED replays).  One test: make test PYTEST_ARGS='tests/test_x.py::test_y'
# (or scripts/test.sh tests/test_x.py::test_y; TIERED_FAST=1 skips the static checks).

SHELL := /bin/bash
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help test test-fast demo soak lint bench proto env

help:
	@echo "Quickstart:"
	@echo "  make test   # set up .venv and ZooKeeper, run lint, type checks and tests"
	@echo "  make demo   # a real local cluster: tier a topic, disable it (delete policy), re-enable it"
	@echo "  make test-fast  # the tests that start no process (about a minute)"
	@echo "Other targets: lint bench proto env soak (the randomized run for TIERED_SOAK_SECONDS per mode)"

test:
	bash scripts/test.sh $(PYTEST_ARGS)

test-fast:
	TIERED_FAST=1 bash scripts/test.sh -m 'not processes and not soak' $(PYTEST_ARGS)

demo:
	bash scripts/demo.sh

soak:
	TIERED_FAST=1 bash scripts/test.sh system_tests -m soak -s $(PYTEST_ARGS)

lint:
	bash scripts/lint.sh

# make bench [BENCH=name...] [BENCH_ARGS=--quick]: see scripts/bench.sh; table in bench/RESULTS.md
bench:
	BENCH="$(BENCH)" BENCH_ARGS="$(BENCH_ARGS)" bash scripts/bench.sh

proto:
	@bash scripts/ensure_env.sh
	@if [ -f scripts/gen_proto.sh ]; then \
		PATH="$(CURDIR)/.venv/bin:$$PATH" bash scripts/gen_proto.sh; \
	else \
		echo "proto: scripts/gen_proto.sh does not exist yet"; \
	fi

env:
	bash scripts/ensure_env.sh
