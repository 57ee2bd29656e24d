"""The ZooKeeper metadata store: Kafka's ZooKeeper-mode layout (docs/design.md §3.1, paths in
``tiered.cluster.zk_paths``) under the connect string's chroot.

``store``         ``ZooKeeperMetadataStore``, put together from the parts below
``leadership``    election through the ephemeral ``/controller`` and ``/controller_epoch``, and
                  loss of leadership with the session (LOST, or SUSPENDED beyond a grace)
``writes``        every write as one multi behind the checks of that election's versions
``loading``       ``load`` and the live brokers, read in bulk (``tiered.zk_multi_read``)
``live_brokers``  the watch on ``/brokers/ids``
``znodes``        the data of the topic and delete job znodes

Every request waits at most the session timeout, then fails with ``MetadataStoreError``
(``tiered.zk_client``).
"""

from __future__ import annotations

from controller.store.zookeeper.live_brokers import LiveBrokersCallback
from controller.store.zookeeper.store import ZooKeeperMetadataStore
from controller.store.zookeeper.znodes import ZnodeOp, topic_create_ops, topic_update_ops

__all__ = [
    "LiveBrokersCallback",
    "ZnodeOp",
    "ZooKeeperMetadataStore",
    "topic_create_ops",
    "topic_update_ops",
]
