"""Controller jobs: the PySpark bulk delete of a topic's remote data."""
