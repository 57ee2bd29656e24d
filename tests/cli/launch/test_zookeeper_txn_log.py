"""The transaction-log reader of the system tests' zombie check, on a real server's log: it sees
each session's writes, a multi's ops, and who held the leader znode when."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.zookeeper import ZooKeeperServer, start_kazoo_client
from tests.support.zookeeper_txn_log import MULTI, read_txn_log, writes_outside_leadership

pytestmark = pytest.mark.zookeeper


def test_writes_outside_leadership_are_found_in_a_real_log(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk")
    server.start()
    leader = start_kazoo_client(server.connect_string)
    zombie = start_kazoo_client(server.connect_string)
    try:
        leader.ensure_path("/topics")  # a parent anyone creates: exempt
        leader.create("/controller", b"leader", ephemeral=True)
        txn = leader.transaction()
        txn.check("/controller", 0)
        txn.create("/topics/by-leader", b"")
        txn.set_data("/topics", b"touched")
        assert not any(isinstance(result, Exception) for result in txn.commit())
        zombie.create("/topics/by-zombie", b"")  # while /controller is the leader's
        leader.delete("/controller")
        leader.create("/topics/after-resigning", b"")
        zombie.create("/elsewhere", b"")  # not guarded
        sessions = {leader.client_id[0], zombie.client_id[0]}
    finally:
        for client in (leader, zombie):
            client.stop()
            client.close()
        server.stop()

    txns = read_txn_log(server.data_dir)
    assert {t.session for t in txns if t.writes} <= sessions
    multi = next(t for t in txns if t.type == MULTI)
    assert [path for _, path in multi.writes] == ["/topics/by-leader", "/topics"]
    found = writes_outside_leadership(txns, "/controller", ["/topics"], bootstrap=["/topics"])
    assert len(found) == 2, found
    assert "wrote /topics/by-zombie while /controller was 0x" in found[0]
    assert "wrote /topics/after-resigning while /controller was nobody's" in found[1]
