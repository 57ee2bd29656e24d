"""``tiered-cluster up|down|status --data-dir DIR``: a local cluster of separate processes.

The package: :mod:`.layout` (``cluster.json``), :mod:`.spec` (a process as data),
:mod:`.services` (ZooKeeper, the S3 endpoint, Spark), :mod:`.profile` (every process of a
cluster, controllers and brokers included), :mod:`.daemons` (pid files, logs, starting and
stopping), :mod:`.local` (up and down), :mod:`.status` and :mod:`.command` (the command line)."""

from cli.cluster.command import build_parser, main
from cli.cluster.layout import ClusterRequest
from cli.cluster.local import START_TIMEOUT_S, LocalCluster

__all__ = ["START_TIMEOUT_S", "ClusterRequest", "LocalCluster", "build_parser", "main"]
