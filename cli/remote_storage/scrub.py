"""``tiered-remote-storage scrub``: objects in the bucket that nothing claims.

The active controller lists everything under the remote storage root and reports the objects
that no RLMM segment record and no unfinished delete job claims and that are older than
``--min-age-ms`` (default one hour, so that a copy in flight is never taken for one), by reason:
a deleted topic's, a segment the RLMM does not know under a live topic, a segment whose metadata
is gone as deleted. ``--execute`` deletes them (Alter on the cluster; Describe is enough for the
report). The exit status is 0 whatever it finds.
"""

from __future__ import annotations

import argparse
from typing import Any

from cli.common import EXIT_OK, REMOTE_STORAGE_CALL_TIMEOUT_S, admin_client, print_json
from tiered.cluster.model import DEFAULT_SCRUB_MIN_AGE_MS, RemoteStorageScrub

__all__ = ["add_arguments", "run", "scrub_json", "scrub_text"]

HELP = "report (and with --execute delete) remote objects that nothing claims"
DESCRIPTION = (__doc__ or "").split("\n\n")[1].replace("\n", " ")


def _min_age_ms(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--min-age-ms must be a whole number of milliseconds >= 0, got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--min-age-ms must be >= 0, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--min-age-ms",
        type=_min_age_ms,
        default=DEFAULT_SCRUB_MIN_AGE_MS,
        metavar="N",
        help=f"only objects at least this old are orphans (default {DEFAULT_SCRUB_MIN_AGE_MS})",
    )
    parser.add_argument(
        "--execute",
        action="store_true",
        help="delete the orphans found (needs Alter on the cluster); without it nothing changes",
    )


def scrub_json(scrub: RemoteStorageScrub) -> dict[str, Any]:
    """``{"scanned_objects", "orphans": {"objects", "bytes", "by_reason": {...}}, "examples",
    "deleted"}``."""
    return {
        "scanned_objects": scrub.scanned_objects,
        "orphans": {
            "objects": scrub.orphan_objects,
            "bytes": scrub.orphan_bytes,
            "by_reason": {reason.value: count for reason, count in scrub.by_reason.items()},
        },
        "examples": list(scrub.examples),
        "deleted": scrub.deleted,
    }


def scrub_text(scrub: RemoteStorageScrub, execute: bool) -> list[str]:
    lines = [
        f"Listed {scrub.scanned_objects} objects: {scrub.orphan_objects} orphans "
        f"({scrub.orphan_bytes} bytes) that nothing claims.",
    ]
    if scrub.orphan_objects:
        lines.extend(f"  {reason.value}: {count}" for reason, count in scrub.by_reason.items())
        lines.append(f"Examples ({len(scrub.examples)} of {scrub.orphan_objects}):")
        lines.extend(f"  {key}" for key in scrub.examples)
    if execute:
        lines.append(f"Deleted {scrub.deleted} of {scrub.orphan_objects} orphans.")
    elif scrub.orphan_objects:
        lines.append("Nothing was deleted; --execute deletes them.")
    return lines


def run(args: argparse.Namespace) -> int:
    with admin_client(args, REMOTE_STORAGE_CALL_TIMEOUT_S) as admin:
        scrub = admin.scrub_remote_storage(args.min_age_ms, args.execute)
    if args.format == "json":
        print_json(scrub_json(scrub))
    else:
        for line in scrub_text(scrub, args.execute):
            print(line)
    return EXIT_OK
