# Quickstart:
#   make test    environment, static checks, whole test suite (what CI runs)
#   make demo    local demo
# Also: make lint | bench | proto.  One test: make test PYTEST_ARGS='tests/test_x.py::test_y'
# (or scripts/test.sh tests/test_x.py::test_y; TIERED_FAST=1 skips the static checks).

SHELL := /bin/bash
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help test demo lint bench proto env

help:
	@echo "Quickstart:"
	@echo "  make test   # set up .venv and ZooKeeper, run lint, type checks and tests"
	@echo "  make demo   # local demo"
	@echo "Other targets: lint bench proto env"

test:
	bash scripts/test.sh $(PYTEST_ARGS)

demo:
	bash scripts/demo.sh

lint:
	bash scripts/lint.sh

bench:
	bash scripts/bench.sh

proto:
	@bash scripts/ensure_env.sh
	@if [ -f scripts/gen_proto.sh ]; then \
		PATH="$(CURDIR)/.venv/bin:$$PATH" bash scripts/gen_proto.sh; \
	else \
		echo "proto: scripts/gen_proto.sh does not exist yet"; \
	fi

env:
	bash scripts/ensure_env.sh
