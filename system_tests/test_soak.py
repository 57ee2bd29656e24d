"""The soak: random faults, rounds after rounds, for as long as ``TIERED_SOAK_SECONDS`` says
(default 300), in both metadata modes. Marked ``soak``, so the test command and CI skip it:

    TIERED_SOAK_SECONDS=1800 .venv/bin/pytest system_tests -m soak

Each round injects one fault (the active controller killed -9, a broker killed -9 or paused,
ZooKeeper restarted in ZooKeeper mode), and while it lasts produces records and disables or
re-enables random topics with random policies, as operators would keep doing; then it heals
the fault and checks every invariant of the harness. ``TIERED_SOAK_SEED`` replays a run: the
seed is printed first.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable

import pytest

from cli.launch.zookeeper import ZooKeeperError
from system_tests.conftest import MODES, ClusterFactory
from system_tests.harness import SystemCluster
from tests.support.polling import poll_until
from tiered.admin import TopicDescription
from tiered.errors import TieredError

log = logging.getLogger(__name__)

TOPICS = 6
OPERATIONS_PER_ROUND = 6
# A generous bound for the whole soak; the loop itself stops at TIERED_SOAK_SECONDS.
SOAK_TIMEOUT_S = 6 * 3600

Fault = Callable[[SystemCluster, random.Random], Callable[[], None]]


def _kill_the_active_controller(cluster: SystemCluster, rng: random.Random) -> Callable[[], None]:
    victim = cluster.active_controller()
    victim.kill()

    def heal() -> None:
        poll_until(
            lambda: _active_or_none(cluster) not in (None, victim),
            timeout=60,
            what="the standby to take over",
        )
        victim.start()  # back as the standby

    return heal


def _kill_a_broker(cluster: SystemCluster, rng: random.Random) -> Callable[[], None]:
    victim = cluster.brokers[rng.choice(sorted(cluster.brokers))]
    victim.kill()
    return victim.start


def _pause_a_broker(cluster: SystemCluster, rng: random.Random) -> Callable[[], None]:
    victim = cluster.brokers[rng.choice(sorted(cluster.brokers))]
    victim.pause()
    return victim.resume


def _restart_zookeeper(cluster: SystemCluster, rng: random.Random) -> Callable[[], None]:
    assert cluster.zookeeper is not None
    zookeeper = cluster.zookeeper
    zookeeper.kill() if rng.random() < 0.5 else zookeeper.stop()

    def heal() -> None:
        # Under load the JVM once aborted (SIGABRT, no hs_err file) while starting; an operator
        # would start it again, and what the soak tests is the cluster around it.
        for attempt in range(1, 4):
            try:
                zookeeper.start()
                return
            except ZooKeeperError as e:
                print(f"soak: ZooKeeper did not start (attempt {attempt}): {e}"[:2000])
        zookeeper.start()

    return heal


def _active_or_none(cluster: SystemCluster) -> object:
    try:
        return cluster.active_controller()
    except Exception:
        return None


def _faults(mode: str) -> list[Fault]:
    faults: list[Fault] = [_kill_the_active_controller, _kill_a_broker, _pause_a_broker]
    if mode == "zookeeper":
        faults.append(_restart_zookeeper)
    return faults


def _operate(cluster: SystemCluster, rng: random.Random, topics: list[TopicDescription]) -> None:
    """What operators and producers do meanwhile: refusals (a disablement already in progress,
    a controller being elected) are expected and change nothing the invariants do not see."""
    topic = rng.choice(topics)
    action = rng.choice(["produce", "produce", "disable", "enable"])
    if action == "produce":
        # A short timeout: the leader may be the paused broker, and a round should not wait on it.
        cluster.produce_acked(topic, rng.randrange(len(topic.partitions)), 20, timeout_s=3)
        return
    configs = (
        {"remote.storage.enable": "true"}
        if action == "enable"
        else {
            "remote.storage.enable": "false",
            "remote.log.disable.policy": rng.choice(["retain", "delete"]),
        }
    )
    try:
        cluster.admin.incremental_alter_configs(topic.name, configs)
    except TieredError as e:
        log.info("soak: %s %s refused: %s", action, topic.name, e)


@pytest.mark.soak
@pytest.mark.timeout(SOAK_TIMEOUT_S)
@pytest.mark.parametrize("mode", MODES)
def test_soak_random_faults(system_cluster: ClusterFactory, mode: str) -> None:
    seconds = float(os.environ.get("TIERED_SOAK_SECONDS", "300"))
    seed = int(os.environ.get("TIERED_SOAK_SEED", str(random.randrange(2**32))))
    print(f"soak: mode={mode} seed={seed} seconds={seconds:.0f}", flush=True)
    rng = random.Random(seed)
    cluster = system_cluster(mode, brokers=3, **{"controller.request.timeout.ms": "2000"})
    topics = cluster.tiered_topics([f"soak{i}" for i in range(TOPICS)], min_segments=1)
    deadline = time.monotonic() + seconds
    rounds = 0
    while time.monotonic() < deadline:
        fault = rng.choice(_faults(mode))
        started = time.monotonic()
        heal = fault(cluster, rng)
        try:
            for _ in range(OPERATIONS_PER_ROUND):
                _operate(cluster, rng, topics)
        finally:
            heal()
        cluster.wait_for_live_brokers(set(cluster.brokers), timeout_s=60)
        cluster.check_invariants(timeout_s=180)
        took = time.monotonic() - started
        print(f"soak: round {rounds}: {fault.__name__.lstrip('_')}, invariants hold ({took:.1f} s)")
        rounds += 1
    print(f"soak: {rounds} rounds, {cluster.ledger.count()} acknowledged records", flush=True)
    assert rounds > 0
