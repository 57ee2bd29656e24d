"""``python -m tiered.security.zookeeper_migration``: sets the ACL of every existing znode of a
chroot by the cluster's rule (Kafka's ``zookeeper-security-migration.sh``), for a cluster that
turns ``zookeeper.set.acl`` on (``--zookeeper.acl secure``) or off (``unsecure``) after its znodes
were created. Run it with the daemons stopped, once per chroot (``zookeeper.connect``,
``rlmm.zookeeper.connect``), as the cluster's identity (``zookeeper.jaas.config.file`` in
``--config``, with its ``zookeeper.ssl.*`` keys for a ZooKeeper that serves TLS only).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace

from kazoo.security import OPEN_ACL_UNSAFE

from tiered.properties import load_properties
from tiered.security.zookeeper_auth import ZooKeeperSecurity
from tiered.zk_client import TRANSPORT_ERRORS, ZkClient

__all__ = ["main", "migrate"]

SECURE, UNSECURE = "secure", "unsecure"
_BATCH = 1000
_SYSTEM_ZNODE = "/zookeeper"  # the server's own, never the cluster's


def migrate(
    connect: str, security: ZooKeeperSecurity, secure: bool, timeout_s: float = 30.0
) -> int:
    """Sets the ACL of the chroot of ``connect`` and of every znode below it; returns how many.
    Raises kazoo's errors (``ZooKeeperAuthenticationError`` when ``security`` is not the owner)."""
    zk = ZkClient(connect, timeout_s, replace(security, set_acl=secure))
    zk.kazoo.start(timeout=timeout_s)
    try:
        root = zk.chroot or "/"
        if zk.exists(root) is None:
            raise ValueError(f"{connect}: no znode {root} to migrate")
        zk.check_may_change(root)
        changed, level = 0, [root]
        while level:
            below: list[str] = []
            for start in range(0, len(level), _BATCH):
                batch = [p for p in level[start : start + _BATCH] if p != _SYSTEM_ZNODE]
                # Without set.acl the rule gives no ACL: the open one.
                pending = [
                    zk.kazoo.set_acls_async(p, zk.acl_for(p) or OPEN_ACL_UNSAFE)
                    for p in batch
                    if p != "/"
                ]
                children = [(p, zk.kazoo.get_children_async(p)) for p in batch]
                for result in pending:
                    zk.wait(result)
                changed += len(pending)
                for path, result in children:
                    below += [f"{path.rstrip('/')}/{child}" for child in zk.wait(result)]
            level = below
        return changed
    finally:
        zk.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tiered.security.zookeeper_migration", description=__doc__
    )
    parser.add_argument("--zookeeper.connect", dest="connect", required=True)
    parser.add_argument(
        "--config",
        required=True,
        help="properties with zookeeper.jaas.config.file (and zookeeper.ssl.* for TLS)",
    )
    parser.add_argument("--zookeeper.acl", dest="acl", choices=(SECURE, UNSECURE), required=True)
    args = parser.parse_args(argv)
    try:
        security = ZooKeeperSecurity.from_config(load_properties(args.config))
        if security.credentials is None:
            raise ValueError(f"{args.config} has no zookeeper.jaas.config.file")
        count = migrate(args.connect, security, args.acl == SECURE)
    except (OSError, ValueError) as e:
        print(f"INVALID_CONFIG: {e}", file=sys.stderr)
        return 2
    except TRANSPORT_ERRORS as e:
        print(f"ZooKeeper at {args.connect}: {e}", file=sys.stderr)
        return 1
    print(f"{args.acl}: set the ACL of {count} znodes under {args.connect}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
