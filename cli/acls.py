"""``tiered-acls``: Kafka's ``kafka-acls.sh`` for this cluster, with its flags and its output.

    tiered-acls --bootstrap-server H:P --add --allow-principal User:alice --operation Read --topic t
    tiered-acls --bootstrap-server H:P --list [--topic t | --group g | --cluster] [--principal User:alice]
    tiered-acls --bootstrap-server H:P --remove --deny-principal User:bob --operation All --topic t --force

``--add`` creates, for each resource (``--topic``, ``--group``, ``--cluster``), an ALLOW for each
``--allow-principal`` from each ``--allow-host`` (default ``*``) and a DENY for each
``--deny-principal`` from each ``--deny-host``, for each ``--operation`` (default All).
``--remove`` removes those, or every ACL of the resource when no principal is named; it asks
first unless ``--force``. ``--list`` lists the ACLs of the resources named, or every ACL.
``--resource-pattern-type`` is literal (the default) or prefixed; ``--list`` and ``--remove`` also
take match and any. Changing ACLs needs Alter on the cluster, listing them Describe; a refusal
prints its error name (``CLUSTER_AUTHORIZATION_FAILED: ...``) and changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Sequence

from cli.common import (
    add_bootstrap_option,
    admin_client,
    invalid,
    run,
)
from tiered.admin import AdminClient
from tiered.security.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from tiered.security.principal import KafkaPrincipal

__all__ = ["build_parser", "main"]

_PATTERN_TYPES = ("literal", "prefixed", "match", "any")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tiered-acls",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_option(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="create ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    for flag, what in (
        ("--allow-principal", "a principal (Type:Name) to allow"),
        ("--deny-principal", "a principal (Type:Name) to deny"),
        ("--allow-host", "a host the allowed principals may come from (default *)"),
        ("--deny-host", "a host the denied principals are denied from (default *)"),
        (
            "--operation",
            "an operation (Read, Write, Create, Delete, Alter, Describe, "
            "ClusterAction, DescribeConfigs, AlterConfigs, All, ...; default All)",
        ),
        ("--topic", "a topic (or, with --resource-pattern-type prefixed, a prefix)"),
        ("--group", "a consumer group (or, with --resource-pattern-type prefixed, a prefix)"),
    ):
        parser.add_argument(flag, action="append", default=[], help=f"{what}; repeatable")
    parser.add_argument("--principal", action="append", default=[], help="--list: only these")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type",
        default="literal",
        help=f"one of {', '.join(_PATTERN_TYPES)} (default literal)",
    )
    parser.add_argument("--force", action="store_true", help="--remove without asking")
    return parser


def _principal(text: str, flag: str) -> str:
    try:
        return str(KafkaPrincipal.parse(text))
    except ValueError as e:
        raise invalid(f"{flag} {e}") from None


def _pattern_type(text: str, listing: bool) -> PatternType:
    allowed = _PATTERN_TYPES if listing else _PATTERN_TYPES[:2]
    if text.strip().lower() not in allowed:
        raise invalid(
            f"--resource-pattern-type {text!r} is not valid; valid values: {', '.join(allowed)}"
        )
    return PatternType.parse(text, "--resource-pattern-type")


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    try:
        return [AclOperation.parse(o, "--operation") for o in args.operation] or [AclOperation.ALL]
    except ValueError as e:
        raise invalid(str(e)) from None


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    resources = [(ResourceType.TOPIC, t) for t in args.topic]
    resources += [(ResourceType.GROUP, g) for g in args.group]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return resources


def _entries(args: argparse.Namespace) -> list[AccessControlEntry]:
    entries = []
    for permission, principals, hosts, flag in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host, "--allow-principal"),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host, "--deny-principal"),
    ):
        for principal in principals:
            for host in hosts or [WILDCARD_HOST]:
                for operation in _operations(args):
                    entries.append(
                        AccessControlEntry(_principal(principal, flag), host, operation, permission)
                    )
    return entries


def _bindings(args: argparse.Namespace, pattern_type: PatternType) -> list[AclBinding]:
    bindings = []
    for resource_type, name in _resources(args):
        try:
            pattern = ResourcePattern(resource_type, name, pattern_type)
            bindings += [AclBinding(pattern, entry) for entry in _entries(args)]
        except ValueError as e:
            raise invalid(str(e)) from None
    return bindings


def _print_acls(title: str, pattern: ResourcePattern, bindings: Sequence[AclBinding]) -> None:
    """kafka-acls.sh's block: the resource, then a tab-indented line per ACL."""
    print(f"{title} `{pattern}`: ")
    for binding in bindings:
        print(f" \t{binding.entry} ")
    print()


def _current(admin: AdminClient, patterns: Sequence[ResourcePattern]) -> None:
    for pattern in patterns:
        found = admin.describe_acls(
            AclBindingFilter(
                ResourcePatternFilter(pattern.resource_type, pattern.name, pattern.pattern_type)
            )
        )
        _print_acls("Current ACLs for resource", pattern, found)


def _add(admin: AdminClient, args: argparse.Namespace) -> int:
    pattern_type = _pattern_type(args.resource_pattern_type, listing=False)
    if not _resources(args):
        raise invalid("--add needs a resource: --topic, --group or --cluster")
    bindings = _bindings(args, pattern_type)
    if not bindings:
        raise invalid("--add needs --allow-principal or --deny-principal")
    by_pattern = _grouped(bindings)
    for pattern, mine in by_pattern.items():
        _print_acls("Adding ACLs for resource", pattern, mine)
    admin.create_acls(bindings)
    _current(admin, list(by_pattern))
    return 0


def _remove(admin: AdminClient, args: argparse.Namespace) -> int:
    pattern_type = _pattern_type(args.resource_pattern_type, listing=True)
    resources = _resources(args)
    if not resources:
        raise invalid("--remove needs a resource: --topic, --group or --cluster")
    entries = _entries(args)
    filters = []
    for resource_type, name in resources:
        pattern = ResourcePatternFilter(resource_type, name, pattern_type)
        if not entries:
            filters.append(AclBindingFilter(pattern))
        filters += [
            AclBindingFilter(
                pattern,
                AccessControlEntryFilter(e.principal, e.host, e.operation, e.permission_type),
            )
            for e in entries
        ]
    if not args.force and not _confirmed(resources, entries):
        print("Removal aborted", file=sys.stderr)
        return 1
    deleted = admin.delete_acls(filters)
    for removed, mine in _grouped(deleted).items():
        _print_acls("Removed ACLs for resource", removed, mine)
    return 0


def _confirmed(resources: Sequence[tuple[ResourceType, str]], entries: Sequence[object]) -> bool:
    what = "\n".join(f" \t{e} " for e in entries) if entries else " \tall ACLs"
    names = ", ".join(f"{t.name}:{n}" for t, n in resources)
    print(f"Are you sure you want to remove ACLs: \n{what} \n from resources {names}? (y/n)")
    return sys.stdin.readline().strip().lower() == "y"


def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    resources = _resources(args)
    pattern_type = (
        _pattern_type(args.resource_pattern_type, listing=True) if resources else PatternType.ANY
    )
    principals: list[str | None] = [_principal(p, "--principal") for p in args.principal]
    named: list[tuple[ResourceType, str | None]] = list(resources) or [(ResourceType.ANY, None)]
    filters = [
        AclBindingFilter(ResourcePatternFilter(t, n, pattern_type), AccessControlEntryFilter(p))
        for t, n in named
        for p in principals or [None]
    ]
    found: dict[AclBinding, None] = {}
    for binding_filter in filters:
        found.update(dict.fromkeys(admin.describe_acls(binding_filter)))
    for pattern, mine in _grouped(list(found)).items():
        _print_acls("Current ACLs for resource", pattern, mine)
    return 0


def _grouped(bindings: Sequence[AclBinding]) -> dict[ResourcePattern, list[AclBinding]]:
    grouped: dict[ResourcePattern, list[AclBinding]] = defaultdict(list)
    for binding in bindings:
        grouped[binding.pattern].append(binding)
    return dict(grouped)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        with admin_client(args) as admin:
            if args.add:
                return _add(admin, args)
            if args.remove:
                return _remove(admin, args)
            return _list(admin, args)

    return run(body)


if __name__ == "__main__":
    raise SystemExit(main())
