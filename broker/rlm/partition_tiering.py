"""A partition's tiering on this broker, in one place: its tiered epoch and its state, changed only
by the events below, every change checked against one table (as ``controller/tiered_state.py``
does for a topic). The broker's record of a hosted partition (persisted in the assignment
journal), the RemoteLogManager and its copy tasks all read this one object; ``broker.tiering``
fires the events and turns their outcome into RemoteLogManager work.

==============  =====================  ===========================  ===========================
from            event                  to                           when
==============  =====================  ===========================  ===========================
NOT_TIERED      hosting                COPYING, COPY_PAUSED         the topic is tiered (paused:
                                                                    ``remote.log.copy.disable``)
NOT_TIERED      hosting                STOPPED_RETAIN / _DELETE     the topic was disabled at
                                                                    epoch E > 0, or a stop was
                                                                    acked before hosting
NOT_TIERED      assignment             COPYING, COPY_PAUSED         first tiered now
COPYING         assignment             COPY_PAUSED                  ``remote.log.copy.disable``
COPY_PAUSED,    reenable               COPYING                      an assignment not older
STOPPED_*                                                           than the stop allows copying
                                                                    again: it resumes at the
                                                                    partition's epoch (or later)
any             disable_remote_topic   STOPPED_RETAIN / _DELETE     DisableRemoteTopic(E): epoch
                                                                    raised to E; a stop older
                                                                    than a recorded one is a no-op
NOT_TIERED      restore                any other                    as the journal recorded it
==============  =====================  ===========================  ===========================

An event that changes nothing (the same state at the same epoch) is no transition and always
allowed; any other pair raises :class:`InvalidTieringTransition`.

The epoch is the one copies are stamped with and fenced by: a copy stamped below it is discarded
instead of finished, so once a stop raised it, nothing stamped below is ever finished.
``delete_below_epoch`` is the epoch of the last delete-policy stop: remote data stamped below it
belongs to the bulk delete, and copying that resumes does not count it as copied.

Events come under the broker's state change lock (or from the RemoteLogManager's own callers).
Copy threads ask :meth:`PartitionTiering.copy_epoch` when a copy starts and again before it
finishes: it reads the state and the epoch together, so a copy is never stamped with the epoch
of the stop that is ending copying (such a copy would survive the deletion for that epoch).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from tiered.api import TopicIdPartition
from tiered.config import RemoteLogDisablePolicy

__all__ = [
    "InvalidTieringTransition",
    "PartitionTiering",
    "TieringConfigs",
    "TieringEvent",
    "TieringState",
]

log = logging.getLogger(__name__)


class TieringState(enum.Enum):
    NOT_TIERED = "not_tiered"  # never tiered here: nothing remote to copy, expire or serve
    COPYING = "copying"
    COPY_PAUSED = "copy_paused"  # Kafka 3.9's remote.log.copy.disable: a retain stop, in place
    STOPPED_RETAIN = "stopped_retain"  # KIP-950 retain: remote data is expired and served
    STOPPED_DELETE = "stopped_delete"  # KIP-950 delete: remote data is the bulk delete's

    @property
    def stop_policy(self) -> RemoteLogDisablePolicy | None:
        """How copying is off (a copy pause keeps everything, as retain); None while copying or
        never tiered."""
        return _STOP_POLICIES.get(self)


_STOP_POLICIES = {
    TieringState.COPY_PAUSED: RemoteLogDisablePolicy.RETAIN,
    TieringState.STOPPED_RETAIN: RemoteLogDisablePolicy.RETAIN,
    TieringState.STOPPED_DELETE: RemoteLogDisablePolicy.DELETE,
}
_STOPPED = {
    RemoteLogDisablePolicy.RETAIN: TieringState.STOPPED_RETAIN,
    RemoteLogDisablePolicy.DELETE: TieringState.STOPPED_DELETE,
}


class TieringEvent(enum.Enum):
    HOSTING = "hosting"
    ASSIGNMENT = "assignment"
    REENABLE = "reenable"
    DISABLE_REMOTE_TOPIC = "disable_remote_topic"
    RESTORE = "restore"


_ALL = frozenset(TieringState)
_TIERED = _ALL - {TieringState.NOT_TIERED}
_STARTED = frozenset({TieringState.COPYING, TieringState.COPY_PAUSED})
_STOPS = frozenset(_STOPPED.values())

# The table of the module docstring: (event, from) -> the states it may lead to.
_TRANSITIONS: Mapping[tuple[TieringEvent, TieringState], frozenset[TieringState]] = {
    (TieringEvent.HOSTING, TieringState.NOT_TIERED): _TIERED,
    (TieringEvent.ASSIGNMENT, TieringState.NOT_TIERED): _STARTED,
    (TieringEvent.ASSIGNMENT, TieringState.COPYING): frozenset({TieringState.COPY_PAUSED}),
    **{
        (TieringEvent.REENABLE, source): frozenset({TieringState.COPYING})
        for source in (TieringState.COPY_PAUSED, *_STOPS)
    },
    **{(TieringEvent.DISABLE_REMOTE_TOPIC, source): _STOPS for source in TieringState},
    (TieringEvent.RESTORE, TieringState.NOT_TIERED): _TIERED,
}


class InvalidTieringTransition(ValueError):  # noqa: N818 - as controller.tiered_state's
    """An event that the table does not allow in the partition's state: a bug of the caller."""


@dataclass(frozen=True)
class TieringConfigs:
    """What of a topic's configs the tiering follows."""

    remote_storage_enable: bool
    copy_disable: bool  # remote.log.copy.disable (Kafka 3.9)
    disable_policy: RemoteLogDisablePolicy  # remote.log.disable.policy, as the topic spells it


class PartitionTiering:
    """See the module docstring. Read ``state``, ``tiered_epoch`` and ``delete_below_epoch``;
    change them through the ``handle_*`` events only. Each event returns whether it changed
    anything."""

    def __init__(
        self,
        topic_id_partition: TopicIdPartition,
        tiered_epoch: int = 0,
        state: TieringState = TieringState.NOT_TIERED,
    ) -> None:
        self.topic_id_partition = topic_id_partition
        self._tiered_epoch = tiered_epoch
        self._state = state
        self._delete_below_epoch = tiered_epoch if state is TieringState.STOPPED_DELETE else 0
        self._lock = threading.Lock()  # state and epoch change and are read as one

    def __repr__(self) -> str:
        return (
            f"PartitionTiering({self.topic_id_partition}, {self._state.name}, "
            f"tiered epoch {self._tiered_epoch})"
        )

    @property
    def state(self) -> TieringState:
        return self._state

    @property
    def tiered_epoch(self) -> int:
        return self._tiered_epoch

    @property
    def delete_below_epoch(self) -> int:
        return self._delete_below_epoch

    @property
    def tiered(self) -> bool:
        """Whether the RemoteLogManager leads it: copying, or with remote data to expire or serve."""
        return self._state is not TieringState.NOT_TIERED

    @property
    def copying(self) -> bool:
        return self._state is TieringState.COPYING

    def copy_epoch(self) -> int | None:
        """The tiered epoch a copy is stamped with, or None when no copy may start or finish."""
        with self._lock:
            return self._tiered_epoch if self._state is TieringState.COPYING else None

    # ----------------------------------------------------------------------------- events

    def handle_hosting(
        self, configs: TieringConfigs, stop_before: tuple[int, RemoteLogDisablePolicy] | None
    ) -> bool:
        """Hosted for the first time, at the topic's epoch: takes the topic's state. A stop acked
        before hosting (``(epoch, policy)``) wins over configs older than it."""
        if stop_before is not None and stop_before[0] > self._tiered_epoch:
            epoch, policy = stop_before
            log.info(
                "%s: hosted stopped at tiered epoch %d, as DisableRemoteTopic asked before it was "
                "hosted (its configs are of epoch %d)",
                self.topic_id_partition,
                epoch,
                self._tiered_epoch,
            )
            return self._move(TieringEvent.HOSTING, _STOPPED[policy], epoch)
        if configs.remote_storage_enable:
            return self._move(TieringEvent.HOSTING, _started(configs), self._tiered_epoch)
        if self._tiered_epoch > 0:  # disabled: earlier remote data is expired, served or deleted
            state = _STOPPED[configs.disable_policy]
            return self._move(TieringEvent.HOSTING, state, self._tiered_epoch)
        return False

    def handle_assignment(self, configs: TieringConfigs, tiered_epoch: int) -> bool:
        """New configs for a hosted partition, sent with the topic's ``tiered_epoch``: they start
        tiering, pause copying or resume it, never stop it for a disablement nor raise the epoch
        (DisableRemoteTopic alone does). Configs older than a stop do not resume copying."""
        state = self._state
        if state is TieringState.NOT_TIERED:
            if not configs.remote_storage_enable:
                return False
            return self._move(TieringEvent.ASSIGNMENT, _started(configs), self._tiered_epoch)
        if state is TieringState.COPYING:
            if configs.remote_storage_enable and configs.copy_disable:
                return self._move(
                    TieringEvent.ASSIGNMENT, TieringState.COPY_PAUSED, self._tiered_epoch
                )
            if not configs.remote_storage_enable and tiered_epoch > self._tiered_epoch:
                # Copies stamped with the new epoch would survive the deletion for it.
                log.debug(
                    "%s: remote.storage.enable=false at tiered epoch %d; copying goes on at "
                    "epoch %d until DisableRemoteTopic stops it",
                    self.topic_id_partition,
                    tiered_epoch,
                    self._tiered_epoch,
                )
            return False
        if (
            configs.remote_storage_enable
            and not configs.copy_disable
            and tiered_epoch >= self._tiered_epoch
        ):
            return self.handle_reenable(self._tiered_epoch)
        return False

    def handle_reenable(self, tiered_epoch: int) -> bool:
        """Copying resumes, stamped with ``tiered_epoch`` or the partition's own if later."""
        if self._state is TieringState.COPYING:
            return False
        epoch = max(self._tiered_epoch, tiered_epoch)
        log.info("Copying of %s resumes at tiered epoch %d", self.topic_id_partition, epoch)
        return self._move(TieringEvent.REENABLE, TieringState.COPYING, epoch)

    def handle_disable_remote_topic(
        self, tiered_epoch: int, policy: RemoteLogDisablePolicy
    ) -> bool:
        """KIP-950's DisableRemoteTopic(``tiered_epoch``, ``policy``): stopped with the policy,
        the epoch raised to ``tiered_epoch``. A stop older than the one recorded changes
        nothing (a copy pause counts as one at the partition's epoch)."""
        if self._state.stop_policy is not None and tiered_epoch < self._tiered_epoch:
            return False
        epoch = max(self._tiered_epoch, tiered_epoch)
        return self._move(TieringEvent.DISABLE_REMOTE_TOPIC, _STOPPED[policy], epoch)

    def handle_restore(
        self,
        *,
        tiered: bool | None,
        stopped_policy: RemoteLogDisablePolicy | None,
        delete_below_epoch: int | None,
        configs: TieringConfigs,
    ) -> bool:
        """The state the assignment journal recorded before a restart, at the epoch this object
        was made with. ``tiered`` is None in entries written before it was recorded: those
        follow their configs as a partition hosted anew, unless they were stopped. A retain
        stop is recorded as a copy pause is; the configs tell them apart (the two behave the
        same). ``delete_below_epoch`` is None in entries written before it was recorded."""
        if tiered is None and stopped_policy is None:
            changed = self.handle_hosting(configs, None)
        elif tiered is False:
            changed = False
        else:
            state = TieringState.COPYING
            if stopped_policy is not None:
                state = _STOPPED[stopped_policy]
            if (
                state is TieringState.STOPPED_RETAIN
                and configs.remote_storage_enable
                and configs.copy_disable
            ):
                state = TieringState.COPY_PAUSED
            changed = self._move(TieringEvent.RESTORE, state, self._tiered_epoch)
        if delete_below_epoch is not None:
            self._delete_below_epoch = delete_below_epoch
        return changed

    # ----------------------------------------------------------------------------- internals

    def _move(self, event: TieringEvent, state: TieringState, tiered_epoch: int) -> bool:
        if (state, tiered_epoch) == (self._state, self._tiered_epoch):
            return False
        valid = _TRANSITIONS.get((event, self._state), frozenset())
        if state not in valid:
            names = ", ".join(sorted(s.name for s in valid)) or "none"
            raise InvalidTieringTransition(
                f"{self.topic_id_partition}: {event.value} cannot move tiering from "
                f"{self._state.name} (tiered epoch {self._tiered_epoch}) to {state.name} "
                f"(tiered epoch {tiered_epoch}); valid targets: {names}"
            )
        with self._lock:
            self._tiered_epoch = tiered_epoch
            if state is TieringState.STOPPED_DELETE:
                self._delete_below_epoch = tiered_epoch
            self._state = state
        return True


def _started(configs: TieringConfigs) -> TieringState:
    return TieringState.COPY_PAUSED if configs.copy_disable else TieringState.COPYING
