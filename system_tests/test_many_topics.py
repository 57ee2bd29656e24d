"""Many topics at once, in both metadata modes: 200 topics x 4 partitions on 3 brokers disabled
concurrently by several CLI clients with mixed policies, while another client re-enables topics
of an earlier wave; every topic settles where its configs say and the invariants hold."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from system_tests.conftest import MODES, ClusterFactory
from tests.support.processes import REPO
from tiered.cluster.model import TieredState

TOPICS = 200
PARTITIONS = 4
CLIENTS = 4
IDLE_FRIENDLY = {"remote.log.manager.task.interval.ms": "1000"}


def _client(bootstrap: str, alterations: dict[str, str]) -> list[str]:
    """One CLI client (its own process) altering its topics in order; returns its failures."""
    done = subprocess.run(
        [sys.executable, "-m", "system_tests.configs_client", bootstrap],
        input="".join(f"{topic}\t{add}\n" for topic, add in alterations.items()),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode == 0:
        return []
    return [*done.stdout.splitlines(), *done.stderr.splitlines()[-10:]]


def _policy(i: int) -> str:
    return "delete" if i % 2 else "retain"


@pytest.mark.parametrize("mode", MODES)
def test_200_topics_disabled_concurrently_while_others_are_re_enabled(
    system_cluster: ClusterFactory, mode: str
) -> None:
    # 270 partitions per broker: the test config's 100 ms task interval would keep these two
    # CPUs busy running idle copier and expiration tasks.
    cluster = system_cluster(mode, brokers=3, broker_properties=IDLE_FRIENDLY)
    names = [f"t{i:03d}" for i in range(TOPICS)]
    cluster.tiered_topics(names, partitions=PARTITIONS, records=30, min_segments=1)
    disable = {
        n: f"remote.log.disable.policy={_policy(i)},remote.storage.enable=false"
        for i, n in enumerate(names)
    }
    first_wave, second_wave = names[: TOPICS // 4], names[TOPICS // 4 :]
    re_enabled = first_wave[::2]

    def clients(waves: list[tuple[list[str], dict[str, str]]]) -> list[str]:
        with ThreadPoolExecutor(len(waves)) as pool:
            futures = [
                pool.submit(_client, cluster.bootstrap, {t: add_for[t] for t in topics})
                for topics, add_for in waves
            ]
            return [failure for future in futures for failure in future.result()]

    failures = clients([(first_wave[c::CLIENTS], disable) for c in range(CLIENTS)])
    assert not failures, failures
    cluster.settle()
    # The second wave is disabled by four clients while a fifth re-enables half the first wave.
    enable = dict.fromkeys(re_enabled, "remote.storage.enable=true")
    failures = clients(
        [(second_wave[c::CLIENTS], disable) for c in range(CLIENTS)] + [(re_enabled, enable)]
    )
    assert not failures, failures

    cluster.check_invariants(timeout_s=180)
    topics = {t.name: t for t in cluster.admin.describe_topics()}
    for i, name in enumerate(names):
        topic = topics[name]
        expected = TieredState.ENABLED if name in re_enabled else TieredState.DISABLED
        assert (topic.tiered_state, topic.tiered_epoch) == (expected, 1), name
        assert topic.disable_policy == _policy(i), name
        if _policy(i) == "delete":
            assert topic.delete_job is not None and topic.delete_job.state == "DONE", name
