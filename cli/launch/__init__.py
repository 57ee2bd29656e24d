"""Launchers of the servers a local cluster stands on (ZooKeeper, an S3 endpoint, Spark's
master and workers) and of child processes, used by ``tiered-cluster`` and the tests."""
