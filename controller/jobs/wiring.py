"""Builds the controller's bulk-delete machinery from its configuration: the brokers' remote
storage settings (``remote.storage.*``, ``remote.log.storage.manager.class.name`` and the
plugin's own keys: the RemoteStorageManager is built by :func:`tiered.rsm.create`, as on the
brokers), their RLMM settings (``rlmm.*``), ``bulk.delete.*`` and ``spark.*``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from controller.config import spark_idle_timeout_ms
from controller.jobs.runner import (
    BulkDeleteUnsupportedError,
    DeleteEngine,
    DeleteJobRunner,
    JobHold,
    bulk_deleter_of,
    never_held,
)
from controller.jobs.spark_delete import (
    DEFAULT_FAST_PATH_MAX_OBJECTS,
    FAST_PATH_KEY,
    BulkObjectDeleter,
    EngineChoice,
)
from controller.jobs.spark_session import SessionObserver, SparkSessionProvider
from tiered import rlmm as rlmm_factory
from tiered import rsm as rsm_factory
from tiered.api import DeleteOutcome, RemoteObjectDeleter
from tiered.cluster.model import DeleteJob
from tiered.security.spark_auth import settings_of_secret_file
from tiered.security.zookeeper_auth import security_properties

log = logging.getLogger(__name__)


# Told what each batched delete did: (objects gone, objects that failed).
DeleteObserver = Callable[[int, int], None]


class ObservedDeleteEngine:
    """An engine that tells an observer (the controller's metrics) what each delete did; a
    delete that fails as a whole counts every object as failed."""

    def __init__(self, engine: DeleteEngine, observe: DeleteObserver) -> None:
        self._engine = engine
        self._observe = observe

    def choose(self, object_count: int) -> EngineChoice:
        return self._engine.choose(object_count)

    def delete(
        self,
        deleter: RemoteObjectDeleter,
        handles: Sequence[str],
        engine: EngineChoice,
        on_progress: Callable[[Sequence[str]], None] | None = None,
    ) -> DeleteOutcome:
        try:
            outcome = self._engine.delete(deleter, handles, engine, on_progress)
        except Exception:
            self._observe(0, len(handles))
            raise
        self._observe(outcome.done, outcome.failed)
        return outcome


class BulkDelete:
    """What one controller process keeps for delete jobs across its terms as active
    controller: one RLMM client, one RemoteStorageManager and one Spark session provider
    (``spark``: on a cluster master the controller's term hooks start and stop its session;
    ``bulk.delete.spark.idle.timeout.ms`` from ``remote`` sets how long idle executors stay, and
    ``bulk.delete.spark.authenticate.secret.file`` secures its Spark: :mod:`tiered.security.spark_auth`)."""

    def __init__(
        self,
        node_id: int,
        remote: Mapping[str, str],
        spark: Mapping[str, str],
        observe: DeleteObserver | None = None,
        session_observer: SessionObserver | None = None,
    ) -> None:
        self.storage = rsm_factory.create(remote)
        try:
            bulk_deleter_of(self.storage)
        except BulkDeleteUnsupportedError as e:
            log.warning("Delete jobs will fail: %s", e)
        rlmm_config = {k: v for k, v in remote.items() if k.startswith("rlmm.")}
        rlmm_config.update(security_properties(remote))
        rlmm_config["broker.id"] = str(node_id)
        self.rlmm = rlmm_factory.create(rlmm_config)
        # The secured cluster's settings first: the operator's spark.* keys win, as elsewhere.
        conf = {**settings_of_secret_file(remote), **spark}
        conf.pop("spark.master", None)
        self.spark = SparkSessionProvider(
            spark.get("spark.master"),
            conf,
            idle_timeout_ms=spark_idle_timeout_ms(remote),
            observer=session_observer,
        )
        self.engine: DeleteEngine = BulkObjectDeleter(
            self.spark,
            fast_path_max_objects=int(remote.get(FAST_PATH_KEY, DEFAULT_FAST_PATH_MAX_OBJECTS)),
        )
        if observe is not None:
            self.engine = ObservedDeleteEngine(self.engine, observe)

    def runner(
        self, persist: Callable[[DeleteJob], None], hold: JobHold = never_held
    ) -> DeleteJobRunner:
        return DeleteJobRunner(self.rlmm, self.storage, self.engine, persist, hold=hold)

    def close(self) -> None:
        self.spark.close()
        self.rlmm.close()
        self.storage.close()


def create(
    node_id: int,
    remote: Mapping[str, str],
    spark: Mapping[str, str],
    observe: DeleteObserver | None = None,
    session_observer: SessionObserver | None = None,
) -> BulkDelete | None:
    """None (with a warning) when the controller has no remote storage settings: delete jobs
    then wait, persisted, until a controller that has them is active."""
    if rsm_factory.ROOT_CONFIG not in remote and rsm_factory.CLASS_NAME_CONFIG not in remote:
        log.warning(
            "Neither %s nor %s in the controller config: topics disabled with the delete policy "
            "will wait for a controller that can run their bulk delete",
            rsm_factory.ROOT_CONFIG,
            rsm_factory.CLASS_NAME_CONFIG,
        )
        return None
    return BulkDelete(node_id, remote, spark, observe, session_observer)
