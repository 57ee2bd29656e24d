"""Builds the controller's bulk-delete machinery from its configuration: the brokers' remote
storage root and RLMM settings (the same keys as on the brokers), and ``spark.*``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from controller.jobs.runner import DeleteJobRunner
from controller.jobs.spark_delete import (
    BulkObjectDeleter,
    SparkSessionProvider,
    list_objects_below_epoch,
)
from tiered import rlmm as rlmm_factory
from tiered.api import TopicIdPartition
from tiered.cluster.model import DeleteJob

log = logging.getLogger(__name__)

FAST_PATH_KEY = "bulk.delete.fast.path.max.objects"
# Simulated per-object delete latency, to model an object store (benchmarks and tests only).
LATENCY_KEY = "bulk.delete.simulated.latency.ms"


class BulkDelete:
    """What one controller process keeps for delete jobs across its terms as active
    controller: one RLMM client and one (lazily started) Spark session."""

    def __init__(self, node_id: int, remote: Mapping[str, str], spark: Mapping[str, str]) -> None:
        self.root = remote["remote.storage.root"]
        rlmm_config = {k: v for k, v in remote.items() if k.startswith("rlmm.")}
        rlmm_config["broker.id"] = str(node_id)
        self.rlmm = rlmm_factory.create(rlmm_config)
        conf = {k: v for k, v in spark.items() if k != "spark.master"}
        self.spark = SparkSessionProvider(spark.get("spark.master"), conf)
        self.deleter = BulkObjectDeleter(
            self.root,
            self.spark,
            fast_path_max_objects=int(remote.get(FAST_PATH_KEY, "2000")),
            latency_s=float(remote.get(LATENCY_KEY, "0")) / 1000,
        )

    def list_objects(self, tp: TopicIdPartition, tiered_epoch: int) -> list[str]:
        return list_objects_below_epoch(
            self.root, tp.topic, tp.topic_id, tp.partition, tiered_epoch
        )

    def runner(self, persist: Callable[[DeleteJob], None]) -> DeleteJobRunner:
        return DeleteJobRunner(self.rlmm, self.list_objects, self.deleter, persist)

    def close(self) -> None:
        self.spark.stop()
        self.rlmm.close()


def create(node_id: int, remote: Mapping[str, str], spark: Mapping[str, str]) -> BulkDelete | None:
    """None (with a warning) when the controller has no remote storage settings: delete jobs
    then wait, persisted, until a controller that has them is active."""
    if "remote.storage.root" not in remote:
        log.warning(
            "No remote.storage.root in the controller config: topics disabled with the delete "
            "policy will wait for a controller that can run their bulk delete"
        )
        return None
    return BulkDelete(node_id, remote, spark)
