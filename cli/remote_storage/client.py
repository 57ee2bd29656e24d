"""The admin client every ``tiered-remote-storage`` subcommand asks the active controller with."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from cli.common import command_config_credentials, explaining_refusals
from tiered.admin import AdminClient

__all__ = ["CHECK_TIMEOUT_S", "controller_admin"]

CHECK_TIMEOUT_S = 3600.0
"""A verify reads every finished segment's objects and a scrub lists the whole root: far longer
than an admin call's usual 30 s."""


@contextlib.contextmanager
def controller_admin(args: argparse.Namespace) -> Iterator[AdminClient]:
    """An admin client of ``--bootstrap-server`` with ``--command-config``'s credentials; a
    refusal raised inside is explained as every CLI explains one."""
    with (
        explaining_refusals(args.command_config, args.bootstrap_server),
        AdminClient(
            args.bootstrap_server,
            timeout_s=CHECK_TIMEOUT_S,
            credentials=command_config_credentials(args.command_config),
        ) as admin,
    ):
        yield admin
