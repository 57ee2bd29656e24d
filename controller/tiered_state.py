"""KIP-950's per-topic tiered storage state machine (docs/design.md §2), built with
``transitions``.

=========  ======================  =========  ==========================================
from       trigger                 to         effect
=========  ======================  =========  ==========================================
ENABLED    disable                 DISABLING  ``tiered_epoch += 1`` (the caller persists,
                                              enqueues and sends DisableRemoteTopic)
DISABLING  disablement_completed   DISABLED   none here (all brokers acked this epoch; the
                                              caller persists, runs the delete policy)
DISABLED   enable                  ENABLED    none: copy resumes, epoch unchanged
DISABLING  disable or enable       --         rejected:
                                              ``TIERED_STORAGE_DISABLEMENT_IN_PROGRESS``
=========  ======================  =========  ==========================================

Any other (state, trigger) pair, and any unknown trigger, raises :class:`InvalidTieredTransition`
(a ``ValueError``): the machine below is the one place that knows which transitions are valid.

**Why one resident model.** ``transitions`` keeps its models in a list, and
``Machine.add_model`` scans that list, so keeping every topic attached for its lifetime makes each
new topic O(n) and attaching a cluster's topics quadratic; attaching a throw-away model per
event costs more than the trigger itself. Instead there is one machine for the process with one
model, and each event loads a topic's state and epoch into it, fires the trigger and reads the
result, all under one lock: every event is O(1) whatever the number of topics. The callbacks only
touch that model (no I/O), so the lock is held briefly.

The public functions take and return frozen :class:`~tiered.cluster.model.TopicMetadata`
values and mutate nothing; persisting the result and telling the brokers is the caller's job.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any

from transitions import Machine, MachineError

from tiered.cluster.model import TieredState, TopicMetadata
from tiered.config import (
    REMOTE_LOG_DELETE_ON_DISABLE,
    REMOTE_LOG_DISABLE_POLICY,
    REMOTE_STORAGE_ENABLE,
    TOPIC_CONFIG_DEF,
    remote_storage_enabled,
    validate_topic_configs,
)
from tiered.errors import ErrorCode, TieredError

DISABLE = "disable"
ENABLE = "enable"
DISABLEMENT_COMPLETED = "disablement_completed"
TRIGGERS: tuple[str, ...] = (DISABLE, ENABLE, DISABLEMENT_COMPLETED)

_ENABLED = TieredState.ENABLED.value
_DISABLING = TieredState.DISABLING.value
_DISABLED = TieredState.DISABLED.value

# The table of docs/design.md §2. A transition with dest None is internal (no state change):
# those two exist only to reject, in their ``before`` callback.
_TRANSITIONS: list[dict[str, Any]] = [
    {"trigger": DISABLE, "source": _ENABLED, "dest": _DISABLING, "after": "raise_epoch"},
    {"trigger": DISABLEMENT_COMPLETED, "source": _DISABLING, "dest": _DISABLED},
    {"trigger": ENABLE, "source": _DISABLED, "dest": _ENABLED},
    {"trigger": DISABLE, "source": _DISABLING, "dest": None, "before": "reject_in_progress"},
    {"trigger": ENABLE, "source": _DISABLING, "dest": None, "before": "reject_in_progress"},
]


class InvalidTieredTransition(ValueError):  # noqa: N818 - the name the design uses
    """A trigger that the state machine does not accept in the topic's state (a caller's bug,
    not an operator's request: requests go through :func:`plan_config_change`)."""

    def __init__(self, topic: TopicMetadata, trigger: str, valid: Collection[str]) -> None:
        valid_text = ", ".join(valid) if valid else "none"
        super().__init__(
            f"cannot fire {trigger!r} on topic {topic.name!r} in state "
            f"{topic.tiered_state.value} (tiered epoch {topic.tiered_epoch}); valid triggers in "
            f"{topic.tiered_state.value}: {valid_text}"
        )
        self.topic = topic
        self.trigger = trigger


class _EventModel:
    """The machine's one model, loaded with a topic's state and epoch for each event."""

    # Set by the Machine (annotations only: an existing attribute would not be replaced).
    state: str
    trigger: Callable[..., bool]

    def load(self, topic: TopicMetadata) -> None:
        self.topic_name = topic.name
        self.tiered_epoch = topic.tiered_epoch

    def raise_epoch(self, event: Any) -> None:
        self.tiered_epoch += 1

    def reject_in_progress(self, event: Any) -> None:
        raise TieredError(
            ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS,
            f"cannot {event.event.name} tiered storage of topic {self.topic_name!r}: the "
            f"disablement of tiered epoch {self.tiered_epoch} is in progress until every broker "
            f"hosting the topic has acknowledged it",
        )


_MODEL = _EventModel()
_MACHINE = Machine(
    model=_MODEL,  # the only one: see the module docstring
    states=[_ENABLED, _DISABLING, _DISABLED],
    initial=_ENABLED,
    transitions=_TRANSITIONS,
    auto_transitions=False,  # no to_<state>() shortcuts around the table
    send_event=True,
    name="tiered_state",
)
_LOCK = threading.Lock()

# transitions logs every callback of every event at INFO (three lines an event): keep that out of
# a controller's INFO log unless someone configured the logger on purpose.
_TRANSITIONS_LOG = logging.getLogger("transitions.core")
if _TRANSITIONS_LOG.level == logging.NOTSET:
    _TRANSITIONS_LOG.setLevel(logging.WARNING)


def attached_model_count() -> int:
    """How many models the shared machine holds (always the one)."""
    with _LOCK:
        return len(_MACHINE.models)


def _valid_triggers(state: str) -> list[str]:
    """The triggers that move a topic out of ``state``."""
    return [
        trigger
        for trigger in TRIGGERS
        if any(t.dest is not None for t in _MACHINE.events[trigger].transitions.get(state, []))
    ]


def fire(topic: TopicMetadata, trigger: str) -> TopicMetadata:
    """Applies one trigger to ``topic`` and returns the new value (``topic`` is unchanged).

    Raises :class:`TieredError` (``TIERED_STORAGE_DISABLEMENT_IN_PROGRESS``) for a disable or an
    enable during DISABLING, and :class:`InvalidTieredTransition` for any other trigger the
    topic's state does not accept."""
    state = topic.tiered_state.value
    if trigger not in _MACHINE.events:
        raise InvalidTieredTransition(topic, trigger, _valid_triggers(state))
    with _LOCK:
        _MODEL.load(topic)
        _MACHINE.set_state(state, model=_MODEL)
        try:
            _MODEL.trigger(trigger)
        except MachineError:
            raise InvalidTieredTransition(topic, trigger, _valid_triggers(state)) from None
        after_state, after_epoch = _MODEL.state, _MODEL.tiered_epoch
    return topic.with_tiered_state(TieredState(after_state), after_epoch)


def complete_disablement(topic: TopicMetadata) -> TopicMetadata:
    """DISABLING -> DISABLED, once every broker hosting the topic acked its tiered epoch."""
    return fire(topic, DISABLEMENT_COMPLETED)


def initial_topic_state(configs: Mapping[str, str]) -> tuple[TieredState, int]:
    """A new topic's state and epoch: ENABLED with remote.storage.enable=true, else DISABLED;
    epoch 0 either way."""
    state = TieredState.ENABLED if remote_storage_enabled(configs) else TieredState.DISABLED
    return state, 0


def was_ever_tiered(topic: TopicMetadata) -> bool:
    """Whether the topic may have remote data: every state but the one a topic created
    untiered keeps until it is first enabled (DISABLED at epoch 0: enabling leaves the epoch,
    and only a disable raises it)."""
    return not (topic.tiered_state is TieredState.DISABLED and topic.tiered_epoch == 0)


def _effective(configs: Mapping[str, str], key: str) -> str:
    definition = TOPIC_CONFIG_DEF[key]
    return definition.normalize(configs.get(key, definition.default))


def plan_config_change(
    topic: TopicMetadata,
    new_configs: Mapping[str, str],
    *,
    requested_keys: Collection[str] | None = None,
) -> tuple[TopicMetadata, str | None]:
    """Validates a topic's whole new config set and works out what it does to the tiered state.

    Returns the new topic value (configs replaced by the normalized set; state and epoch as the
    fired trigger leaves them) and the trigger fired, or None when the tiered state does not
    change. ``topic`` is never modified; an error means nothing is to be persisted.

    - ENABLED and remote.storage.enable now false (or unset): ``disable``.
    - DISABLED and remote.storage.enable now true: ``enable``.
    - DISABLING: a request that mentions remote.storage.enable, or changes the effective
      remote.log.disable.policy or remote.log.delete.on.disable, is rejected with
      ``TIERED_STORAGE_DISABLEMENT_IN_PROGRESS``; any other change fires nothing.

    ``requested_keys`` are the keys the request itself set or deleted (an incremental alter's
    ``--add-config`` and ``--delete-config`` keys). When given, a DISABLING topic rejects any
    request naming remote.storage.enable, whatever its value. When None, the request is taken to
    mention the keys whose value or presence differs between the current and the new set (a key
    carried over unchanged from the current configs is not mentioned)."""
    configs = validate_topic_configs(new_configs)
    enabled = remote_storage_enabled(configs)
    trigger: str | None = None
    if topic.tiered_state is TieredState.DISABLING:
        if _mentions_remote_storage_enable(topic.configs, configs, requested_keys):
            # A disable or an enable: the machine rejects both during DISABLING.
            trigger = ENABLE if enabled else DISABLE
        else:
            _check_policy_unchanged(topic, configs)
    elif topic.tiered_state is TieredState.ENABLED and not enabled:
        trigger = DISABLE
    elif topic.tiered_state is TieredState.DISABLED and enabled:
        trigger = ENABLE
    updated = topic if trigger is None else fire(topic, trigger)
    return updated.with_configs(configs), trigger


def _mentions_remote_storage_enable(
    current: Mapping[str, str], new: Mapping[str, str], requested_keys: Collection[str] | None
) -> bool:
    if requested_keys is not None:
        return REMOTE_STORAGE_ENABLE in requested_keys
    before, after = current.get(REMOTE_STORAGE_ENABLE), new.get(REMOTE_STORAGE_ENABLE)
    if before is None or after is None:
        return before is not after
    return before.strip().lower() != after.strip().lower()


def _check_policy_unchanged(topic: TopicMetadata, configs: Mapping[str, str]) -> None:
    """During DISABLING the policy of the disablement in flight must not change."""
    changed = [
        key
        for key in (REMOTE_LOG_DISABLE_POLICY, REMOTE_LOG_DELETE_ON_DISABLE)
        if _effective(topic.configs, key) != _effective(configs, key)
    ]
    if changed:
        raise TieredError(
            ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS,
            f"cannot change {' or '.join(changed)} of topic {topic.name!r} (now "
            + ", ".join(f"{k}={_effective(topic.configs, k)}" for k in changed)
            + f"): the disablement of tiered epoch {topic.tiered_epoch} is in progress; "
            "other configs may change",
        )
