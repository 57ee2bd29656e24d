"""A ZooKeeper-mode broker's SCRAM credentials: read from ``/config/users`` and kept current by
watches (``scram_znodes`` gives the format), on the broker's own ZooKeeper session.

A children watch on ``/config/users`` finds users as they appear; each user's znode has a data
watch that replaces that user's credentials on every change and drops them when the znode goes.
kazoo's watch recipes set themselves again after a session expiry. Callbacks run on kazoo's
event thread; a znode that does not parse is logged (never its value) and leaves the user
without credentials, and no callback raises.
"""

from __future__ import annotations

import functools
import logging
import threading

from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from tiered.cluster import zk_paths
from tiered.cluster.model import ScramCredentialKey
from tiered.cluster.zk_scram_znodes import decode_user_config, scram_credentials_of
from tiered.security.scram import ScramCredential, ScramMechanism
from tiered.zk_client import ZkClient

__all__ = ["ZkScramCredentials"]

log = logging.getLogger(__name__)


class ZkScramCredentials:
    """The credentials under ``/config/users`` of ``zk``'s chroot, as they change. Lives as long
    as ``zk``'s client (closing the client ends the watches)."""

    def __init__(self, zk: ZkClient) -> None:
        self._zk = zk
        self._lock = threading.Lock()
        self._credentials: dict[ScramCredentialKey, ScramCredential] = {}
        self._watched: set[str] = set()

    def start(self) -> None:
        """Reads every user and sets the watches; raises kazoo's errors if ZooKeeper fails."""
        self._zk.ensure_path(self._zk.path(zk_paths.CONFIG_USERS))
        ChildrenWatch(self._zk.kazoo, self._zk.path(zk_paths.CONFIG_USERS), self._on_users)

    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def _on_users(self, znodes: list[str]) -> None:
        with self._lock:
            new = [z for z in znodes if z not in self._watched]
            self._watched.update(new)
        for znode in new:
            DataWatch(
                self._zk.kazoo,
                self._zk.path(f"{zk_paths.CONFIG_USERS}/{znode}"),
                functools.partial(self._on_user, znode),
            )

    def _on_user(self, znode: str, data: bytes | None, stat: ZnodeStat | None) -> bool | None:
        credentials: dict[ScramMechanism, ScramCredential] = {}
        try:
            user = zk_paths.desanitize(znode)
            if stat is not None:
                credentials = scram_credentials_of(decode_user_config(data))
        except ValueError as e:
            log.warning("ignoring %s/%s: %s", zk_paths.CONFIG_USERS, znode, e)
            return None
        with self._lock:
            for key in [k for k in self._credentials if k[0] == user]:
                del self._credentials[key]
            for mechanism, credential in credentials.items():
                self._credentials[(user, mechanism)] = credential
            if stat is None:  # deleted: the children watch sets a new watch if it comes back
                self._watched.discard(znode)
                return False
        return None
