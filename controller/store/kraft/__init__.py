"""The KRaft metadata store: the controller's state in an embedded, fsync'd record log
(``controller.store.kraft_log``) with snapshots, which brokers follow through FetchMetadata.
Every atomic change is one batch.

``store``           ``KRaftMetadataStore``, put together from the parts below
``active_log``      the log open while this process is the active controller, its image, the
                    lock that orders both, and the fence (``require_active``)
``leadership``      election through the log directory's OS lock, resignation, and
                    ``controller.json``, which names the active controller to the others
``writes``          every write as one batch, committed only while the lock is held
``snapshots``       the log's snapshots, written on a thread every N records, and the image kept
                    for followers far behind
``follower_reads``  ``read_batches``: the batches a follower reads next, or the image
``replay``          the image rebuilt from the log, with or without its lock
``heap``            freed heap handed back to the OS after a snapshot-sized batch
"""

from __future__ import annotations

from controller.store.kraft.leadership import CONTROLLER_FILE
from controller.store.kraft.store import KRaftMetadataStore

__all__ = ["CONTROLLER_FILE", "KRaftMetadataStore"]
