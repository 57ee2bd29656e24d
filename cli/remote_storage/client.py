"""The admin client every ``tiered-remote-storage`` subcommand asks the active controller with."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from cli.common import admin_client
from tiered.admin import AdminClient

__all__ = ["CHECK_TIMEOUT_S", "controller_admin"]

CHECK_TIMEOUT_S = 3600.0
"""A verify reads every finished segment's objects and a scrub lists the whole root: far longer
than an admin call's usual 30 s."""


@contextlib.contextmanager
def controller_admin(args: argparse.Namespace) -> Iterator[AdminClient]:
    """:func:`cli.common.admin_client` with calls bounded by :data:`CHECK_TIMEOUT_S`."""
    with admin_client(args, CHECK_TIMEOUT_S) as admin:
        yield admin
