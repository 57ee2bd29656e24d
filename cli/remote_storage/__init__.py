"""``tiered-remote-storage verify`` and ``scrub``: remote storage checked against the metadata, by
the active controller (so the client needs no storage credentials).

The package: :mod:`.command` (the command line: one subcommand per check) and one module per
subcommand, :mod:`.verify` and :mod:`.scrub`."""

from cli.remote_storage.command import build_parser, main

__all__ = ["build_parser", "main"]
