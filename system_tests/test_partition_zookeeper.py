"""Network partitions between ZooKeeper and the processes whose leadership or membership its
sessions carry, cut with nftables in the test's own network namespace (``tests.support.network``).

Active controller <-> the ensemble's majority, mid-DISABLING (the distributed profile): the old
controller says it lost leadership and stops acting (no broker applies a call of its epoch after
that), the standby takes over and completes every disable, brokers refuse the old epoch's calls,
the old controller comes back as the standby and refuses writes, and ZooKeeper's transaction log
holds no write of the fenced controller's session after the new election nor any controller-store
write from a session without ``/controller``.

Broker <-> ZooKeeper, longer than the broker's session timeout (the local profile's ZooKeeper):
the broker's ephemeral registration goes (the controller sees it gone) and comes back after the
heal, and the disables started during the cut each reach the broker once, at their epoch, and
complete.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

from broker.assignment_journal import read_entries
from cli.cluster.layout import STORE_CHROOT
from controller.broker_channel import DisableWork, disable_request
from controller.disablements import DisableEntry
from system_tests.harness import CONTROLLER_WRITES, STORE_PARENTS
from system_tests.partitions import (
    broker_id,
    client_address,
    cluster_status,
    log_matches,
    partitioned_cluster,
)
from tests.support.polling import poll_until
from tests.support.zookeeper_txn_log import (
    CLOSE_SESSION,
    DELETE,
    read_txn_log,
    writes_outside_leadership,
)
from tiered.admin import AdminClient
from tiered.cluster import zk_paths
from tiered.cluster.model import TieredState
from tiered.config import RemoteLogDisablePolicy
from tiered.errors import ErrorCode
from tiered.rpc.channels import open_channel
from tiered.rpc.v1 import broker_pb2_grpc, controller_pb2, controller_pb2_grpc

pytestmark = [pytest.mark.netns, pytest.mark.timeout(900)]

REQUEST_TIMEOUT_MS = 3000
# What both scenarios start with beside their profile: two brokers, so that one is cut and the
# other acks; a short request timeout, so that a cut broker soon counts as unreachable.
TWO_BROKERS = (
    "--brokers", "2", "--controller-config", f"controller.request.timeout.ms={REQUEST_TIMEOUT_MS}"
)  # fmt: skip
PARTITIONS = 2
RETAIN = {"remote.storage.enable": "false"}
# The broker's "tiering stopped" line, with the epoch of the controller that sent the stops.
STOPPED = r"DisableRemoteTopic of controller epoch (\d+): tiering stopped"


def _tiered_topics(admin: AdminClient, victim: str) -> dict[str, list[int]]:
    """Three tiered topics of ``PARTITIONS`` partitions: the partitions ``victim`` leads, by
    topic (some, not all)."""
    topics = [f"ledger-{i}" for i in range(3)]
    for topic in topics:
        admin.create_topic(topic, PARTITIONS, {"remote.storage.enable": "true"})
    owed = {
        t: [
            p.partition for p in admin.describe_topic(t).partitions if p.leader == broker_id(victim)
        ]
        for t in topics
    }
    assert any(owed.values()) and not all(len(v) == PARTITIONS for v in owed.values()), owed
    return owed


def _disable_all_but_the_victims_share(admin: AdminClient, owed: dict[str, list[int]]) -> None:
    """Disables every topic of ``owed`` (retain) and waits until only the partitions the cut
    broker leads (``owed``) are still owed."""
    for topic in owed:
        admin.alter_configs(topic, RETAIN)

    def only_the_victim_owes() -> bool:
        described = admin.describe_topics(list(owed), include_partition_state=False)
        return all(d.disable_acks_owed == len(owed[d.name]) for d in described)

    poll_until(only_the_victim_owes, timeout=60, what="every broker but the cut one to ack")


def _disabled(admin: AdminClient, topics: list[str]) -> bool:
    return all(
        admin.describe_topic(t, include_partition_state=False).tiered_state is TieredState.DISABLED
        for t in topics
    )


def _stops_by_epoch(data: Path, broker: str) -> dict[int, list[datetime]]:
    """When ``broker`` applied DisableRemoteTopic calls, by the sender's controller epoch."""
    found: dict[int, list[datetime]] = {}
    for at, match in log_matches(data, broker, STOPPED):
        found.setdefault(int(match.group(1)), []).append(at)
    return found


def test_the_active_controller_cut_off_from_the_zookeeper_majority_mid_disabling(
    tmp_path: Path,
) -> None:
    data = tmp_path / "cluster"
    up_args = ("--profile", "distributed", "--spark-workers", "1", *TWO_BROKERS)
    with partitioned_cluster(data, *up_args) as (network, layout):
        code, status = cluster_status(data)
        assert code == 0, status
        old = status["active_controller"]
        standby = next(
            p["name"] for p in status["processes"] if p["role"] == "controller" and p["name"] != old
        )
        bootstrap = f"{client_address(status, old)},{client_address(status, standby)}"
        admin = AdminClient(bootstrap, timeout_s=30)
        victim = "broker-2"
        owed = _tiered_topics(admin, victim)
        topics = list(owed)

        # The disables wait on broker-2, which the active controller cannot reach.
        network.cut(old, victim, both_ways=True)
        _disable_all_but_the_victims_share(admin, owed)
        (old_epoch,) = _stops_by_epoch(data, "broker-1")

        # The active controller cut off from every ZooKeeper server, mid-DISABLING.
        zookeepers = sorted(n for n in layout["hosts"] if n.startswith("zookeeper-"))
        for member in zookeepers:
            network.cut(old, member, both_ways=True)

        def standby_active() -> bool:
            return cluster_status(data)[1]["active_controller"] == standby

        poll_until(standby_active, timeout=120, what=f"{standby} to take over")
        stepping_down = rf"Controller epoch {old_epoch}: stepping down \(leadership lost\)"
        poll_until(
            lambda: log_matches(data, old, stepping_down),
            timeout=60,
            what=f"{old} to say it lost leadership",
        )
        lost = log_matches(data, old, r"ZooKeeper session lost|disconnected from ZooKeeper for")
        assert lost, f"{old} stepped down without saying its ZooKeeper session was gone"
        ((fenced_at, _),) = log_matches(data, old, stepping_down)
        poll_until(lambda: _disabled(admin, topics), timeout=120, what="every disable to complete")

        network.heal()

        def old_is_standby() -> bool:
            code, status = cluster_status(data)
            alive = {p["name"]: p["alive"] for p in status["processes"]}
            return code == 0 and status["active_controller"] == standby and alive[old]

        poll_until(old_is_standby, timeout=120, what=f"{old} back as the standby, all reachable")
        assert _disabled(admin, topics)

        # A call carrying the old controller's epoch is refused whole by every broker, which
        # has heard the new one; nothing of it is applied.
        described = admin.describe_topics(topics)
        new_epochs = {b: max(_stops_by_epoch(data, b), default=0) for b in ("broker-1", "broker-2")}
        assert new_epochs["broker-2"] > old_epoch, new_epochs
        journals_before = {b: read_entries(data / b) for b in ("broker-1", "broker-2")}
        for broker in ("broker-1", "broker-2"):
            stale = DisableWork(
                old_epoch,
                [
                    DisableEntry(d.name, d.topic_id, p.partition, 1, RemoteLogDisablePolicy.DELETE)
                    for d in described
                    for p in d.partitions
                    if p.leader == broker_id(broker)
                ],
            )
            with open_channel(client_address(status, broker)) as channel:
                answer = broker_pb2_grpc.BrokerServiceStub(channel).DisableRemoteTopic(
                    disable_request(stale), timeout=30
                )
            assert answer.error.code == ErrorCode.STALE_CONTROLLER_EPOCH, (broker, answer)
            assert read_entries(data / broker) == journals_before[broker], broker

        # The old controller, back, writes nothing: it refuses an alter as not the controller.
        with open_channel(client_address(status, old)) as channel:
            refused = controller_pb2_grpc.AdminServiceStub(channel).AlterConfigs(
                controller_pb2.AlterConfigsRequest(
                    topic=topics[0], configs={**RETAIN, "retention.ms": "86400000"}
                ),
                timeout=30,
            )
        assert refused.error.code == ErrorCode.NOT_CONTROLLER, refused

        # One actor at a time: no broker applied a call of the old epoch after its controller
        # stepped down, and the old controller never heard a broker refuse it (it sent none).
        for broker in ("broker-1", "broker-2"):
            late = [at for at in _stops_by_epoch(data, broker).get(old_epoch, []) if at > fenced_at]
            assert not late, f"{broker} applied stops of epoch {old_epoch} after {fenced_at}"
        assert not log_matches(data, old, r"rejected controller epoch"), old
        # Every partition broker-2 leads stopped at the disable's epoch, once.
        journal = {(e["topic"], e["partition"]): e for e in read_entries(data / victim)}
        for topic, partitions in owed.items():
            for partition in partitions:
                entry = journal[(topic, partition)]
                assert (entry["tiered_epoch"], entry["stopped_policy"]) == (1, "retain"), entry

        _assert_no_write_from_the_fenced_controller(data, zookeepers)


def _assert_no_write_from_the_fenced_controller(data: Path, zookeepers: list[str]) -> None:
    """ZooKeeper's own record, every member's log merged: the session that held ``/controller``
    before the last election wrote nothing after it (its expiry, logged by the server under its
    id, aside), and no session wrote the controller store without holding ``/controller``."""
    members = [data / "zookeeper" / f"server-{n.rpartition('-')[2]}" / "data" for n in zookeepers]
    txns = read_txn_log(*members)
    controller = STORE_CHROOT + zk_paths.CONTROLLER
    elections = [
        (t.zxid, t.session)
        for t in txns
        for op, path in t.writes
        if path == controller and op != DELETE
    ]
    assert len(elections) >= 2, f"expected the old and the new election: {elections}"
    (_, old_session), (elected_at, new_session) = elections[-2:]
    assert old_session != new_session, elections
    late = [
        t
        for t in txns
        if t.session == old_session and t.zxid > elected_at and t.type != CLOSE_SESSION
    ]
    assert not late, f"session 0x{old_session:x} wrote after it was fenced: {late[:5]}"
    zombie = writes_outside_leadership(
        txns,
        controller,
        [STORE_CHROOT + p for p in CONTROLLER_WRITES],
        [STORE_CHROOT, *(STORE_CHROOT + p for p in STORE_PARENTS)],
    )
    assert not zombie, f"{len(zombie)} controller-store writes without leadership: {zombie[:5]}"


def _stopped_partitions(data: Path, broker: str) -> list[tuple[int, str, int]]:
    """(controller epoch, topic, partition) of every partition stop ``broker`` applied, one per
    stop, in the order of its log."""
    stops: list[tuple[int, str, int]] = []
    for _, match in log_matches(data, broker, STOPPED + r".*"):
        epoch = int(match.group(1))
        for topic, partitions in re.findall(r"(\S+) \[([\d, ]+)\]", match.group(0)):
            stops.extend((epoch, topic, int(p)) for p in partitions.split(", "))
    return stops


def test_a_broker_cut_off_from_zookeeper_past_its_session_timeout(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    with partitioned_cluster(data, "--metadata", "zookeeper", *TWO_BROKERS) as (network, _):
        code, status = cluster_status(data)
        assert code == 0, status
        active = status["active_controller"]
        admin = AdminClient(client_address(status, active), timeout_s=30)
        victim = "broker-2"
        owed = _tiered_topics(admin, victim)
        topics = list(owed)

        def registered() -> bool:
            brokers = admin.describe_cluster().brokers
            return any(b.broker_id == broker_id(victim) and not b.fenced for b in brokers)

        assert registered()
        network.cut(victim, "zookeeper", both_ways=True)
        # Past the broker's session timeout its ephemeral /brokers/ids/2 is gone.
        poll_until(lambda: not registered(), timeout=60, what=f"{victim}'s registration to go")
        _disable_all_but_the_victims_share(admin, owed)
        # Not live, so sent nothing: nothing of these topics stopped on the victim yet.
        assert not [s for s in _stopped_partitions(data, victim) if s[1] in topics]

        network.heal()
        poll_until(registered, timeout=60, what=f"{victim} to register again")
        poll_until(lambda: _disabled(admin, topics), timeout=120, what="every disable to complete")
        assert log_matches(data, victim, r"ZooKeeper session expired"), victim
        assert log_matches(data, victim, r"a new session: registering again"), victim

        # Each stop reached its broker once (the victim after the heal, the other during the
        # cut), at the controller's one epoch; each topic's completion was counted once.
        epoch = admin.describe_cluster().controller_epoch
        for broker in ("broker-1", victim):
            stops = [s for s in _stopped_partitions(data, broker) if s[1] in topics]
            expected = [
                (epoch, t, p)
                for t, partitions in owed.items()
                for p in range(PARTITIONS)
                if (p in partitions) == (broker == victim)
            ]
            assert sorted(stops) == sorted(expected), (broker, stops)
        for topic in topics:
            done = log_matches(data, active, rf"Topic {topic}: every broker acked tiered epoch 1;")
            assert len(done) == 1, (topic, done)
        journal = {(e["topic"], e["partition"]): e for e in read_entries(data / victim)}
        for topic, partitions in owed.items():
            for partition in partitions:
                entry = journal[(topic, partition)]
                assert (entry["tiered_epoch"], entry["stopped_policy"]) == (1, "retain"), entry
