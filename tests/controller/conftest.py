"""The controller tests' shared fixture: a Controller over a real KRaft store in a temporary
directory (``tests.support.controller.running_controller``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.controller import Controller
from tests.support.controller import running_controller


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    with running_controller(tmp_path) as controller:
        yield controller
