"""The randomized run: a nemesis (``system_tests.nemesis``) cuts and heals random links between
the cluster's processes, kills them with -9 and restarts them, pauses them with SIGSTOP and
resumes them, while clients (``system_tests.workload``) produce with an idempotent producer,
commit a group's offsets, disable and re-enable topics under both policies, and delete and
re-create them. Every operation goes into a history file; after the last heal the cluster's
final state is read and ``system_tests.history_checker`` names every guarantee the history and
the final state show broken. The harness's own invariants are checked last.

Both metadata modes, in the test's network namespace (``netns``), each process on its own
loopback address. ``test_randomized_run`` is the short run the test command runs
(``SHORT_RUN_S`` of faults per mode); ``test_soak`` (marked ``soak``: ``make soak``) runs for
``TIERED_SOAK_SECONDS`` (default 300) per mode. The seed is printed first, and
``TIERED_SOAK_SEED`` replays a run.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.launch.cgroups import CGROUP_ROOT_ENV
from system_tests.conftest import MODES, ClusterFactory
from system_tests.final_state import final_state_json, read_final_state, settle
from system_tests.history import FAIL, INFO, OK, Event, History, read_history
from system_tests.history_checker import check
from system_tests.nemesis import Nemesis
from system_tests.workload import GROUP, Workload
from tests.support.network import Network

TOPICS = 4
SHORT_RUN_S = 15.0
# However slow the machine, a run strikes and heals this many times.
MIN_ROUNDS = 2
# A round: its faults, then this many client operations, then the heal.
FAULTS_PER_ROUND = (1, 2)
OPERATIONS_PER_ROUND = (4, 12)
# After the last heal, how long disables and delete jobs have to finish.
SETTLE_S = 90.0
# A generous bound for a whole soak; the run itself stops at TIERED_SOAK_SECONDS.
SOAK_TIMEOUT_S = 6 * 3600


@pytest.fixture
def network() -> Iterator[Network]:
    """The run's cuts, and the cgroups of the cluster's processes (``TIERED_CGROUP_ROOT``);
    asked for before ``system_cluster``, so closed after the cluster stopped."""
    network = Network.create({})
    os.environ[CGROUP_ROOT_ENV] = str(network.cgroup_root)
    try:
        yield network
    finally:
        os.environ.pop(CGROUP_ROOT_ENV, None)
        network.close()


def randomized_run(
    network: Network, system_cluster: ClusterFactory, tmp_path: Path, mode: str, seconds: float
) -> None:
    seed = int(os.environ.get("TIERED_SOAK_SEED", str(random.randrange(2**32))))
    history_path = tmp_path / f"history-{mode}.jsonl"
    print(f"randomized run: mode={mode} seed={seed} seconds={seconds:.0f} history={history_path}",
          flush=True)  # fmt: skip
    rng = random.Random(seed)  # the rounds' shape
    phases = Phases()
    cluster = system_cluster(
        mode, brokers=3, own_hosts=True, **{"controller.request.timeout.ms": "2000"}
    )
    network.hosts.update(cluster.hosts)
    phases.done("up")
    history = History(history_path)
    try:
        # One stream each, so that a replay makes the same choices as long as the answers are
        # the same (a client's choices depend on what it was answered).
        nemesis = Nemesis(cluster, network, history, random.Random(f"{seed}/nemesis"))
        workload = Workload(
            cluster, history, random.Random(f"{seed}/clients"), [f"run{i}" for i in range(TOPICS)]
        )
        workload.prepare()
        phases.done("prepared")
        deadline = time.monotonic() + seconds
        rounds = 0
        while time.monotonic() < deadline or rounds < MIN_ROUNDS:
            for _ in range(rng.randint(*FAULTS_PER_ROUND)):
                nemesis.strike()
            for _ in range(rng.randint(*OPERATIONS_PER_ROUND)):
                workload.step()
            nemesis.heal()
            rounds += 1
        workload.close()
        phases.done("faults")
        cluster.wait_for_live_brokers(set(cluster.brokers), timeout_s=60)
        settle(cluster, SETTLE_S)
        phases.done("settled")
        final = read_final_state(cluster, history.now(), GROUP, workload.topic_ids)
        phases.done("final state")
        (tmp_path / f"final-{mode}.json").write_text(final_state_json(final))
        events = read_history(history_path)
        violations = check(events, final)
        print(f"randomized run: {rounds} rounds; {_tally(events)}; {len(violations)} violations; "
              f"{phases}", flush=True)  # fmt: skip
        for violation in violations:
            print(f"randomized run: {violation}", flush=True)
        assert not violations, f"seed {seed}, history {history_path}:\n" + "\n".join(
            map(str, violations[:20])
        )
        cluster.check_invariants(timeout_s=60)
        phases.done("invariants")
        print(f"randomized run: {phases}", flush=True)
    finally:
        history.close()


@pytest.mark.netns
@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", MODES)
def test_randomized_run(
    network: Network, system_cluster: ClusterFactory, tmp_path: Path, mode: str
) -> None:
    randomized_run(network, system_cluster, tmp_path, mode, SHORT_RUN_S)


@pytest.mark.soak
@pytest.mark.netns
@pytest.mark.timeout(SOAK_TIMEOUT_S)
@pytest.mark.parametrize("mode", MODES)
def test_soak(network: Network, system_cluster: ClusterFactory, tmp_path: Path, mode: str) -> None:
    seconds = float(os.environ.get("TIERED_SOAK_SECONDS", "300"))
    randomized_run(network, system_cluster, tmp_path, mode, seconds)


class Phases:
    """How long each phase of the run took, for its last line."""

    def __init__(self) -> None:
        self._last = time.monotonic()
        self._took: list[tuple[str, float]] = []

    def done(self, phase: str) -> None:
        now = time.monotonic()
        self._took.append((phase, now - self._last))
        self._last = now

    def __str__(self) -> str:
        return ", ".join(f"{phase} {took:.1f} s" for phase, took in self._took)


def _tally(events: list[Event]) -> str:
    """``op ok/fail/info`` for every operation of the history."""
    counts: Counter[tuple[str, str]] = Counter((e.op, e.type) for e in events)
    ops = sorted({op for op, _ in counts})
    return ", ".join(
        f"{op} {counts[(op, OK)]}/{counts[(op, FAIL)]}/{counts[(op, INFO)]}" for op in ops
    )
