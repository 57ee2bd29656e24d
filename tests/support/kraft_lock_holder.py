"""A separate controller process holding a KRaft metadata log's lock, for the takeover tests.

Usage: ``python -m tests.support.kraft_lock_holder DIR CONTROLLER_ID MODE``.

It elects itself (blocking until it holds the lock), creates topic ``held-0`` and registers
broker 7, then prints ``epoch {controller_epoch}`` (stdout flushed). Then, by MODE:

* ``wait``: does nothing more until stdin closes (or it is killed);
* ``write``: creates topics ``held-1``, ``held-2``, ... forever, printing ``topic {name}`` after
  each create returns (durable), so every printed name is an acknowledged write.
"""

from __future__ import annotations

import sys
import threading
import uuid

from controller.store.kraft import KRaftMetadataStore
from tiered.cluster.model import BrokerRegistration, TieredState, TopicMetadata


def held_topic(i: int) -> TopicMetadata:
    return TopicMetadata(
        name=f"held-{i}",
        topic_id=uuid.uuid5(uuid.NAMESPACE_URL, f"held-{i}"),
        replicas=(7, 7),
        configs={"remote.storage.enable": "true"},
        tiered_state=TieredState.ENABLED,
    )


def main() -> None:
    directory, controller_id, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    store = KRaftMetadataStore(directory, segment_bytes=4096, lock_poll_s=0.05)
    epoch = store.elect(controller_id, f"127.0.0.1:{9000 + controller_id}", threading.Event())
    store.writes.create_topic(held_topic(0))
    store.register_broker(BrokerRegistration(broker_id=7, host="127.0.0.1", port=9097))
    print(f"epoch {epoch}", flush=True)
    if mode == "wait":
        sys.stdin.read()
        return
    i = 1
    while True:
        store.writes.create_topic(held_topic(i))
        print(f"topic held-{i}", flush=True)
        i += 1


if __name__ == "__main__":
    main()
