"""``tiered-cluster up|down|status --data-dir DIR``: a local cluster of separate processes.

The package: :mod:`.layout` (``cluster.json``), :mod:`.profile` (the processes as data),
:mod:`.daemons` (pid files, logs, starting and stopping), :mod:`.local` (up and down),
:mod:`.status` and :mod:`.command` (the command line)."""

from tiered.cli.cluster.command import build_parser, main
from tiered.cli.cluster.local import START_TIMEOUT_S, LocalCluster

__all__ = ["START_TIMEOUT_S", "LocalCluster", "build_parser", "main"]
