"""Controller-epoch fencing of the controller's calls to a broker: the broker keeps the highest
controller epoch it has heard (AssignPartitions, DisableRemoteTopic and RemovePartitions carry
one, and so do the answers to RegisterBroker and BrokerHeartbeat) and refuses a call of an older
controller (a zombie) whole, with STALE_CONTROLLER_EPOCH. Epoch 0 marks a local call (tests,
tools), which is not fenced."""

from __future__ import annotations

import logging
import threading

from tiered.errors import ErrorCode, TieredError

__all__ = ["ControllerEpochFence"]

log = logging.getLogger(__name__)


class ControllerEpochFence:
    """Thread-safe."""

    def __init__(self, node_id: int) -> None:
        self._node_id = node_id
        self._epoch = 0
        self._lock = threading.Lock()

    def check(self, controller_epoch: int) -> None:
        """Raises ``TieredError`` (STALE_CONTROLLER_EPOCH) if ``controller_epoch`` is older than
        one already heard; else it becomes the highest heard, if it is higher."""
        if controller_epoch == 0:
            return
        with self._lock:
            if controller_epoch < self._epoch:
                raise TieredError(
                    ErrorCode.STALE_CONTROLLER_EPOCH,
                    f"controller epoch {controller_epoch} is older than {self._epoch}, already "
                    f"seen by broker {self._node_id}",
                )
            if controller_epoch > self._epoch:
                log.info("Controller epoch is now %d", controller_epoch)
            self._epoch = controller_epoch
