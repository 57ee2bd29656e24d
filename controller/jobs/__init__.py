"""Controller jobs: the PySpark bulk delete of a topic's remote data."""

from controller.jobs.spark_delete import (
    BulkDeleteError,
    BulkObjectDeleter,
    DeleteCounts,
    SparkSessionProvider,
    delete_keys_locally,
    delete_keys_with_spark,
    list_objects_below_epoch,
)

__all__ = [
    "BulkDeleteError",
    "BulkObjectDeleter",
    "DeleteCounts",
    "SparkSessionProvider",
    "delete_keys_locally",
    "delete_keys_with_spark",
    "list_objects_below_epoch",
]
