"""Reading the ACLs of ZooKeeper mode (``acl_znodes``'s layout): all of them at once (the
controller's ``load``, a broker's start) and one pattern's (after its change notification).

``AclZkFollower`` keeps a broker's ``AclIndex`` current on the broker's own ZooKeeper session, as
ZooKeeper-mode Kafka brokers do: a full read at start, then a watch on both change-notification
directories. Each new notification re-reads the pattern it names; a new session reads everything
again (notifications are purged by the controller, oldest first, beyond ``KEPT_NOTIFICATIONS``).
Raise kazoo's errors (``TRANSPORT_ERRORS``) and ValueError for bad data.
"""

from __future__ import annotations

import logging
import threading

from kazoo.client import KazooState
from kazoo.recipe.watchers import ChildrenWatch

from tiered.cluster.zk_acl_znodes import (
    ACL_CHANGE_PREFIX,
    CHANGE_PATHS,
    acl_id,
    decode_acls,
    decode_change,
    pattern_dirs,
    pattern_path,
)
from tiered.security.acl import AclBinding, ResourcePattern
from tiered.security.acl_index import AclIndex
from tiered.zk_client import ZkClient
from tiered.zk_multi_read import BulkReader

__all__ = ["AclZkFollower", "read_all_acls", "read_pattern", "sequence_of"]

log = logging.getLogger(__name__)


def read_all_acls(zk: ZkClient, reader: BulkReader) -> AclIndex:
    """Every ACL under ``zk``'s chroot."""
    patterns: list[ResourcePattern] = []
    for directory, resource_type, pattern_type in pattern_dirs():
        for name in sorted(zk.children(zk.path(directory))):
            patterns.append(ResourcePattern(resource_type, name, pattern_type))
    index = AclIndex()
    values = reader.iter([zk.path(pattern_path(p)) for p in patterns])
    for pattern, found in zip(patterns, values, strict=True):
        if found is not None:
            for binding in decode_acls(pattern, found[0]):
                index.put(acl_id(binding), binding)
    return index


def read_pattern(zk: ZkClient, pattern: ResourcePattern) -> tuple[list[AclBinding], int | None]:
    """The bindings of one pattern's znode and its version (None: no znode, no ACLs)."""
    found = zk.get(zk.path(pattern_path(pattern)))
    if found is None:
        return [], None
    return decode_acls(pattern, found[0]), found[1].version


def sequence_of(child: str) -> int:
    """The sequence number of a change notification's name (``acl_changes_0000000042``)."""
    return int(child.removeprefix(ACL_CHANGE_PREFIX))


class AclZkFollower:
    """A broker's ACLs, following ZooKeeper. ``acls`` is replaced whole on a full read and
    changed in place per pattern otherwise (readers see one or the other, never a torn index)."""

    def __init__(self, zk: ZkClient) -> None:
        self._zk = zk
        self._reader = BulkReader(zk)
        self._lock = threading.Lock()
        self.acls = AclIndex()
        self._seen: dict[str, int] = {}  # change path -> highest sequence applied
        self._closed = False
        self.loaded = threading.Event()

    def start(self) -> None:
        """Reads every ACL, then follows the notifications (kazoo's watch threads)."""
        for path in CHANGE_PATHS:
            self._zk.ensure_path(self._zk.path(path))
        self._reload()
        for path in CHANGE_PATHS:
            ChildrenWatch(
                self._zk.kazoo,
                self._zk.path(path),
                lambda children, path=path: self._on_changes(path, children),
            )
        self._zk.kazoo.add_listener(self._on_state)

    def close(self) -> None:
        self._closed = True
        self._zk.kazoo.remove_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: a new session may have missed notifications; read again on
        # a thread of its own.
        if state == KazooState.LOST and not self._closed:
            self.loaded.clear()
        elif state == KazooState.CONNECTED and not self.loaded.is_set() and not self._closed:
            threading.Thread(target=self._reload_logged, name="acl-reload", daemon=True).start()

    def _reload_logged(self) -> None:
        try:
            self._reload()
        except Exception:
            log.exception("Reading the ACLs from ZooKeeper failed; the next change reads again")

    def _reload(self) -> None:
        with self._lock:
            seen = {
                path: max(
                    (sequence_of(c) for c in self._zk.children(self._zk.path(path))), default=-1
                )
                for path in CHANGE_PATHS
            }
            self.acls = read_all_acls(self._zk, self._reader)
            self._seen = seen
            self.loaded.set()
        log.info("Read %d ACLs from ZooKeeper", len(self.acls))

    def _on_changes(self, path: str, children: list[str]) -> bool | None:
        """kazoo's watch thread; returning False would end the watch, so this survives any
        failure (logged; the next notification or session reads again)."""
        if self._closed:
            return False
        try:
            self._apply_changes(path, children)
        except Exception:  # kazoo's errors, bad data: the watch must live on
            log.exception("Following ACL changes under %s failed; reading every ACL again", path)
            self.loaded.clear()
            self._reload_logged()
        return None

    def _apply_changes(self, path: str, children: list[str]) -> None:
        sequences = sorted(sequence_of(c) for c in children if c.startswith(ACL_CHANGE_PREFIX))
        with self._lock:
            last = self._seen.get(path, -1)
            new = [s for s in sequences if s > last]
            for sequence in new:
                found = self._zk.get(self._zk.path(f"{path}/{ACL_CHANGE_PREFIX}{sequence:010d}"))
                if found is not None:
                    self._refresh(decode_change(path, found[0]))
                self._seen[path] = sequence

    def _refresh(self, pattern: ResourcePattern) -> None:
        bindings, _ = read_pattern(self._zk, pattern)
        wanted = {acl_id(b): b for b in bindings}
        for stored_id, _ in self.acls.of_pattern(pattern):
            if stored_id not in wanted:
                self.acls.remove(stored_id)
        for wanted_id, binding in wanted.items():
            self.acls.put(wanted_id, binding)
