"""The controller's Prometheus endpoint scraped over HTTP from real controller and broker processes,
in both metadata modes: the active controller and the standby, a disable held up by a paused
broker (DISABLING, entries pending, failed and retried requests) then completed (DISABLED, the
bulk delete's objects), admin errors by name, and metadata-store writes; and a daemon whose
metrics port is taken refusing to start."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.launch.ports import free_port
from tests.support.cluster import Cluster, running_cluster
from tests.support.metrics import (
    BULK_DELETE,
    CHANNEL,
    CONTROLLER,
    REQUESTS,
    Samples,
    figure,
    metrics_url,
    scrape,
)
from tests.support.polling import poll_until
from tests.support.processes import REPO
from tiered.admin import AdminClient
from tiered.cluster.model import TieredState
from tiered.errors import ErrorCode, TieredError

pytestmark = pytest.mark.processes


def poll_scrape(url: str, what: str, reached: object, timeout: float = 60) -> Samples:
    """Scrapes until ``reached(samples)`` holds; returns those samples."""
    seen: list[Samples] = [{}]

    def check() -> bool:
        seen[0] = scrape(url)
        return bool(reached(seen[0]))  # type: ignore[operator]

    poll_until(check, timeout=timeout, what=what)
    return seen[0]


@pytest.fixture(params=["kraft", "zookeeper"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    yield from running_cluster(
        request,
        tmp_path,
        request.param,
        broker_failpoints={1: {"broker.disable.stopped": "pause"}},
        **{"metrics.port": "0", "controller.request.timeout.ms": "2000"},
    )


def test_figures_follow_a_disable_held_up_by_a_broker(cluster: Cluster) -> None:
    active, standby = (metrics_url(c) for c in cluster.controllers)  # the first one is active
    on_standby = scrape(standby)
    assert figure(on_standby, CONTROLLER + "activecontrollercount") == 0
    assert figure(on_standby, CONTROLLER + "controllerepoch") == 0
    before = scrape(active)
    assert figure(before, CONTROLLER + "activecontrollercount") == 1
    assert (figure(before, CONTROLLER + "controllerepoch") or 0) >= 1
    writes = CONTROLLER + "metadatastorewritelatencyms_count"
    writes_before = figure(before, writes, store=cluster.mode) or 0

    topic = cluster.tiered_topic(
        "metered", 2, {"remote.storage.enable": "true", "segment.bytes": "2000"}
    )
    assert {p.leader for p in topic.partitions} == {1, 2}
    enabled = scrape(active)
    assert figure(enabled, CONTROLLER + "tieredtopiccount", state="ENABLED") == 1
    assert figure(enabled, CONTROLLER + "globaltopiccount") == 1
    assert (figure(enabled, writes, store=cluster.mode) or 0) > writes_before

    cluster.admin.incremental_alter_configs(
        "metered", {"remote.log.disable.policy": "delete", "remote.storage.enable": "false"}
    )
    paused = cluster.brokers[1]
    paused.wait_stopped_at("broker.disable.stopped")
    try:
        # Broker 1 holds its answer: its one partition is owed, and ages; broker 2 acked.
        held = poll_scrape(
            active,
            "DISABLING with broker 1 owing its partition",
            lambda s: (
                figure(s, CONTROLLER + "tieredtopiccount", state="DISABLING") == 1
                and figure(s, CHANNEL + "disableremotetopicpendingentries", broker_id="1") == 1
                and figure(s, CHANNEL + "disableremotetopicpendingentries", broker_id="2") is None
            ),
        )
        assert figure(held, CONTROLLER + "tieredtopiccount", state="ENABLED") == 0
        age = CHANNEL + "disableremotetopicoldestpendingagems"
        held_age = figure(held, age, broker_id="1")
        assert held_age is not None
        with pytest.raises(TieredError) as refused:
            cluster.admin.incremental_alter_configs("metered", {"remote.storage.enable": "true"})
        assert refused.value.code is ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS
        # The request in flight to the paused broker times out: a failure for broker 1.
        poll_scrape(
            active,
            "a failed request to broker 1",
            lambda s: (figure(s, CHANNEL + "requestfailurespersec_total", broker_id="1") or 0) >= 1,
        )
        assert (figure(scrape(active), age, broker_id="1") or 0) > held_age
    finally:
        paused.resume()

    cluster.wait_for_state("metered", TieredState.DISABLED)
    done = poll_scrape(
        active,
        "DISABLED, nothing pending, the bulk delete done",
        lambda s: (
            figure(s, CONTROLLER + "tieredtopiccount", state="DISABLED") == 1
            and figure(s, CHANNEL + "disableremotetopicpendingentries", broker_id="1") is None
            and figure(s, BULK_DELETE + "jobcount", state="RUNNING") == 0
            and figure(s, BULK_DELETE + "jobcount", state="PENDING") == 0
        ),
    )
    assert figure(done, CONTROLLER + "tieredtopiccount", state="DISABLING") == 0
    assert (figure(done, CHANNEL + "requestretriespersec_total", broker_id="1") or 0) >= 1
    assert (figure(done, BULK_DELETE + "objectsdeletedpersec_total") or 0) > 0
    assert figure(done, BULK_DELETE + "objectsfailedpersec_total") == 0
    assert not any(name == BULK_DELETE + "objectsremaining" for name, _ in done)

    # Admin errors by request and error name.
    with pytest.raises(TieredError):
        cluster.admin.describe_topic("no-such-topic")
    counted = scrape(active)
    errors = REQUESTS + "errorspersec_total"
    assert (
        figure(
            counted,
            errors,
            request="IncrementalAlterConfigs",
            error="TIERED_STORAGE_DISABLEMENT_IN_PROGRESS",
        )
        == 1
    )
    assert (
        figure(counted, errors, request="DescribeTopics", error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    )
    assert (figure(counted, errors, request="IncrementalAlterConfigs", error="NONE") or 0) >= 1
    assert (figure(counted, REQUESTS + "requestspersec_total", request="DescribeTopics") or 0) > 1
    assert figure(scrape(standby), CONTROLLER + "activecontrollercount") == 0


@pytest.mark.parametrize("module", ["controller.main", "broker.main"])
def test_a_metrics_port_in_use_stops_the_start_naming_the_key(tmp_path: Path, module: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "daemon.properties"
        config.write_text(
            f"node.id=100\nlisteners=127.0.0.1:{free_port()}\nmetrics.port={port}\n"
            f"metadata.log.dir={tmp_path / 'meta'}\nlog.dirs={tmp_path / 'log'}\n"
        )
        result = subprocess.run(
            [sys.executable, "-m", module, "--config", str(config)],
            cwd=REPO,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 1, result.stderr
    assert f"cannot listen on 127.0.0.1:{port} (metrics.port)" in result.stderr
    assert "serving on" not in result.stdout


def test_alters_of_many_clients_at_once_share_writes(cluster: Cluster) -> None:
    """Group commit in a real controller: 40 clients alter their own topic at the same moment;
    every alter is answered and applied, and the flush-size histogram counts fewer writes than
    alters."""
    names = [f"together-{i}" for i in range(40)]
    for name in names:
        cluster.admin.create_topic(name, 1, {"remote.storage.enable": "true"})
    url = metrics_url(cluster.active_controller())
    before = scrape(url)
    flushes = CONTROLLER + "topicwriteflushsize"
    start = threading.Barrier(len(names))
    errors: list[BaseException] = []

    def alter(name: str) -> None:
        try:
            with AdminClient(cluster.bootstrap) as client:
                client.describe_cluster()  # discovery done before the moment
                start.wait(30)
                client.incremental_alter_configs(name, {"retention.ms": "86400000"})
        except BaseException as e:  # reported by the test's thread
            errors.append(e)

    threads = [threading.Thread(target=alter, args=(n,)) for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    described = cluster.admin.describe_topics(names, include_partition_state=False)
    assert all(t.configs["retention.ms"] == "86400000" for t in described)
    after = scrape(url)

    def grown(suffix: str) -> float:
        return (figure(after, flushes + suffix) or 0.0) - (figure(before, flushes + suffix) or 0.0)

    assert grown("_sum") == len(names)  # every alter's change was written by a flush
    assert 1 <= grown("_count") < len(names)  # in fewer writes than alters


def test_one_alter_of_many_topics_is_one_disable_request_per_broker(cluster: Cluster) -> None:
    """The flush's partitions reach each broker in one DisableRemoteTopic (they are far below a
    request's limit), not one request per topic."""
    names = [f"batched-{i}" for i in range(30)]
    for name in names:
        cluster.admin.create_topic(name, 3, {"remote.storage.enable": "true"})
    described = cluster.admin.describe_topics(names, include_partition_state=False)
    on_broker: dict[int, int] = {}
    for topic in described:
        for partition in topic.partitions:
            on_broker[partition.leader] = on_broker.get(partition.leader, 0) + 1
    url = metrics_url(cluster.active_controller())
    requests, entries = (
        CHANNEL + "disableremotetopicrequestspersec_total",
        CHANNEL + "disableremotetopicentriespersec_total",
    )
    before = scrape(url)
    # Broker 1 holds its acks (its fail point pauses it after the first stop): the controller
    # must have sent everything in the one request each broker got.
    results = cluster.admin.incremental_alter_topics(names, {"remote.storage.enable": "false"})
    assert all(not isinstance(r, TieredError) for r in results)

    def sent(samples: Samples, name: str, broker_id: int) -> float:
        return (figure(samples, name, broker_id=str(broker_id)) or 0.0) - (
            figure(before, name, broker_id=str(broker_id)) or 0.0
        )

    others = [b for b in on_broker if b != 1]
    after = poll_scrape(
        url,
        "every other broker to answer its DisableRemoteTopic",
        lambda s: all(sent(s, requests, b) >= 1 for b in others),
    )
    for broker_id in others:
        assert sent(after, requests, broker_id) == 1
        assert sent(after, entries, broker_id) == on_broker[broker_id]
