"""Hooks for every test directory (tests/ and system_tests/)."""

from __future__ import annotations

import pytest


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """Keeps each phase's report on the test item, so fixtures can dump process logs on failure."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report
