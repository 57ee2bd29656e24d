"""Hooks for every test directory (tests/ and system_tests/).

The ``processes`` marker is a contract the fast target relies on (``make test-fast`` deselects
it): a test that starts a process (ZooKeeper, Spark, a daemon, a CLI, a Kafka client tool) carries
it. System tests, tests marked ``zookeeper`` or ``s3``, tests using their fixtures and tests
parametrized with the ``zookeeper`` backend or mode get it automatically; any other test that
starts one needs ``pytestmark = pytest.mark.processes`` (or the decorator). A test without the
marker that starts a process fails, naming the command, so the marker stays true.

A test marked ``netns`` (network partitions, ``tests.support.network``) runs in a network
namespace of its own: the test process runs it again, in a child pytest under ``unshare --net``,
and takes that outcome; such a test starts processes, so it is ``processes`` too.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.launch.ports import PORT_SHARE_ENV
from tests.support.network import in_test_namespace, run_in_fresh_namespace

PROCESSES = "processes"
_PROCESS_FIXTURES = frozenset(
    {
        "zookeeper_server",
        "zookeeper_ensemble",
        "zk_connect",
        "kazoo_client",
        "system_cluster",
        "s3_endpoint",
        "s3_proxy",
        "s3_store",
    }
)
_SYSTEM_TESTS = Path(__file__).resolve().parent / "system_tests"
_NETNS_TIMEOUT_S = 600.0

_running: list[pytest.Item] = []  # the test whose setup, call or teardown is under way

# The files whose tests take longest in all, longest first (from CI's durations), run first: xdist
# hands whole files to its workers in collection order (scripts/test.sh turns off its own
# reordering, by test count, which put these few-test files last), and a long file handed out
# last leaves one worker busy while the others idle. Every other file follows, those with more
# tests that start processes first, so that the last files handed out are quick ones.
_LONGEST_FIRST = (
    "tests/bench/test_bench_smoke.py",
    "system_tests/test_partition_zookeeper.py",
    "tests/cli/test_cluster_cli.py",
    "tests/cli/test_cluster_loopback_hosts.py",
    "system_tests/test_client_partitions.py",
    "tests/cli/test_cluster_distributed_secure.py",
    "system_tests/test_many_topics.py",
    "system_tests/test_partition_remote_storage.py",
    "tests/cli/test_cluster_secure_services.py",
    "system_tests/test_soak.py",
    "system_tests/test_network_partitions.py",
    "tests/controller/jobs/test_spark_standalone.py",
    "tests/cli/test_demo.py",
    "system_tests/test_zookeeper_ensemble.py",
    "tests/controller/jobs/test_spark_session_standalone.py",
    "tests/cli/test_cluster_profile.py",
    "tests/cli/test_cluster_secure.py",
)
_ROOT = Path(__file__).resolve().parent


def _relative_path(item: pytest.Item) -> str:
    path = Path(str(item.path)).resolve()
    return str(path.relative_to(_ROOT)) if _ROOT in path.parents else ""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        in_system_tests = _SYSTEM_TESTS in Path(str(item.path)).resolve().parents
        uses_processes = _PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        on_zookeeper = callspec is not None and "zookeeper" in callspec.params.values()
        needs_server = any(item.get_closest_marker(m) for m in ("zookeeper", "s3"))
        in_namespace = item.get_closest_marker("netns") is not None
        if in_system_tests or uses_processes or on_zookeeper or needs_server or in_namespace:
            item.add_marker(PROCESSES)
    starting_processes = Counter(
        _relative_path(item) for item in items if item.get_closest_marker(PROCESSES) is not None
    )

    def run_order(item: pytest.Item) -> tuple[int, int]:
        relative = _relative_path(item)
        if relative in _LONGEST_FIRST:
            return _LONGEST_FIRST.index(relative), 0
        return len(_LONGEST_FIRST), -starting_processes[relative]

    items.sort(key=run_order)  # stable: the order within a file, and of files alike, stays


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A ``netns`` test outside its namespace is run inside a fresh one instead."""
    if pyfuncitem.get_closest_marker("netns") is None or in_test_namespace():
        return None
    timeout = pyfuncitem.get_closest_marker("timeout")
    timeout_s = float(timeout.args[0]) if timeout is not None and timeout.args else _NETNS_TIMEOUT_S
    show_output = pyfuncitem.config.getoption("capture") == "no"  # -s
    run_in_fresh_namespace(
        pyfuncitem.nodeid, pyfuncitem.config.rootpath, timeout_s, show_output=show_output
    )
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.remove(item)


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ... under pytest-xdist
    if worker is not None:
        # Parallel runners pick ports from disjoint shares (their servers and daemons too).
        count = os.environ["PYTEST_XDIST_WORKER_COUNT"]
        os.environ[PORT_SHARE_ENV] = f"{worker.removeprefix('gw')}/{count}"
    original_init = subprocess.Popen.__init__

    def checked_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        item = _running[-1] if _running else None
        if item is not None and item.get_closest_marker(PROCESSES) is None:
            raise AssertionError(
                f"{item.nodeid} starts a process ({str(args)[:120]}) but is not marked "
                f"'{PROCESSES}': add `pytestmark = pytest.mark.{PROCESSES}` to its module"
            )
        original_init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = checked_init  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """Keeps each phase's report on the test item, so fixtures can dump process logs on failure."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report
