"""The command line of ``tiered-remote-storage``: a subcommand per check, each in its own module,
which adds its options (``add_arguments``) and runs (``run``): ``verify`` (metadata that promises
what the bucket lacks) and ``scrub`` (objects that nothing claims). A new check is one more module
and one more entry in :data:`SUBCOMMANDS`.

Exit codes: as :mod:`cli.common` (0 success, 1 an error from the cluster, 2 usage), and each
subcommand says when it finds something wrong with an exit 1 of its own.
"""

from __future__ import annotations

import argparse
import types
from collections.abc import Sequence

from cli.common import add_bootstrap_option, add_format_option
from cli.common import run as run_body
from cli.remote_storage import scrub, verify

__all__ = ["SUBCOMMANDS", "build_parser", "main"]

SUBCOMMANDS: dict[str, types.ModuleType] = {"verify": verify, "scrub": scrub}
"""Each subcommand's module: ``HELP``, ``DESCRIPTION``, ``add_arguments(parser)`` and
``run(args) -> int``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tiered-remote-storage",
        description="Remote storage checked against the metadata by the active controller.",
    )
    names = ",".join(SUBCOMMANDS)
    commands = parser.add_subparsers(dest="command", required=True, metavar=f"{{{names}}}")
    for name, module in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=module.HELP, description=module.DESCRIPTION)
        add_bootstrap_option(sub)
        module.add_arguments(sub)
        add_format_option(sub, of="the report")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module = SUBCOMMANDS[args.command]
    return run_body(lambda: int(module.run(args)))


if __name__ == "__main__":
    raise SystemExit(main())
