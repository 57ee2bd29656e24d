"""Fixtures of the system tests: ``system_cluster`` builds a started ``SystemCluster`` (in the
mode the test is parametrized with) and tears it down, printing every process's output when the
test failed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from system_tests.harness import SystemCluster

MODES = ["kraft", "zookeeper"]
ClusterFactory = Callable[..., SystemCluster]


@pytest.fixture
def system_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ClusterFactory]:
    """``system_cluster(mode, brokers=2, failpoints={...}, broker_failpoints={id: {...}},
    broker_properties={...}, ensemble=False, own_hosts=False, **controller_properties)``: a
    started cluster whose first (active) controller has ``failpoints`` armed; ``ensemble`` puts
    the controller store and the RLMM on three ZooKeeper servers; ``own_hosts`` gives every
    process its own loopback address (see ``SystemCluster``)."""
    made: list[SystemCluster] = []

    def make(
        mode: str,
        brokers: int = 2,
        failpoints: dict[str, str] | None = None,
        broker_failpoints: dict[int, dict[str, str]] | None = None,
        broker_properties: dict[str, str] | None = None,
        ensemble: bool = False,
        own_hosts: bool = False,
        **controller_properties: str,
    ) -> SystemCluster:
        cluster = SystemCluster(
            tmp_path / f"cluster-{len(made)}",
            mode,
            brokers,
            controller_properties,
            broker_properties,
            ensemble,
            own_hosts,
        )
        made.append(cluster)
        cluster.controllers[0].failpoints = dict(failpoints or {})
        for broker_id, armed in (broker_failpoints or {}).items():
            cluster.brokers[broker_id].failpoints = dict(armed)
        cluster.start()
        return cluster

    try:
        yield make
    finally:
        report = getattr(request.node, "report_call", None)
        for cluster in made:
            if report is None or report.failed:
                print(cluster.dump_logs())
            cluster.close()
