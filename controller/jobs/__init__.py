"""Controller jobs: the PySpark bulk delete of a topic's remote data."""

from controller.jobs.runner import BulkDeleteUnsupportedError, DeleteJobRunner, bulk_deleter_of
from controller.jobs.spark_delete import (
    BulkDeleteError,
    BulkObjectDeleter,
    EngineChoice,
    SparkSessionProvider,
    delete_with_spark,
)

__all__ = [
    "BulkDeleteError",
    "BulkDeleteUnsupportedError",
    "BulkObjectDeleter",
    "DeleteJobRunner",
    "EngineChoice",
    "SparkSessionProvider",
    "bulk_deleter_of",
    "delete_with_spark",
]
