"""Kafka's ACL model and StandardAuthorizer semantics (the cases of Kafka's StandardAuthorizerTest
and AclAuthorizerTest): super users, deny wins, wildcards, prefixes, implied operations, the
no-ACL default, and filters."""

from __future__ import annotations

import uuid

import pytest

from tiered.security.acl import (
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
from tiered.security.acl_index import AclIndex
from tiered.security.authorizer import AuthorizerConfig, StandardAuthorizer
from tiered.security.principal import KafkaPrincipal, RequestContext

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
ALICE = RequestContext(KafkaPrincipal("User", "alice"), "10.0.0.1", "PLAINTEXT")
BOB = RequestContext(KafkaPrincipal("User", "bob"), "10.0.0.2", "PLAINTEXT")


def binding(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = PatternType.LITERAL,
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern),
        AccessControlEntry(principal, host, operation, permission),
    )


def authorizer(*bindings: AclBinding, **config: object) -> tuple[StandardAuthorizer, AclIndex]:
    index = AclIndex({uuid.uuid4(): b for b in bindings})
    settings = {"enabled": True, **config}
    return StandardAuthorizer(AuthorizerConfig(**settings), lambda: index), index  # type: ignore[arg-type]


def test_disabled_allows_everything() -> None:
    auth, _ = authorizer(binding("t", Op.READ, DENY), enabled=False)
    assert auth.authorize(ALICE, Op.READ, TOPIC, "t")


def test_super_user_is_allowed_whatever_the_acls() -> None:
    auth, _ = authorizer(binding("t", Op.ALL, DENY), super_users=frozenset({"User:alice"}))
    assert auth.authorize(ALICE, Op.DELETE, TOPIC, "t")
    assert not auth.authorize(BOB, Op.DELETE, TOPIC, "t")


def test_no_acl_denies_unless_allow_everyone() -> None:
    auth, _ = authorizer()
    assert not auth.authorize(ALICE, Op.READ, TOPIC, "t")
    auth, _ = authorizer(allow_everyone_if_no_acl_found=True)
    assert auth.authorize(ALICE, Op.READ, TOPIC, "t")


def test_allow_everyone_does_not_open_a_resource_that_has_acls() -> None:
    auth, _ = authorizer(
        binding("t", Op.READ, principal="User:bob"), allow_everyone_if_no_acl_found=True
    )
    assert not auth.authorize(ALICE, Op.READ, TOPIC, "t")
    assert auth.authorize(BOB, Op.READ, TOPIC, "t")
    assert auth.authorize(ALICE, Op.READ, TOPIC, "other")


def test_literal_allow_is_for_that_operation_and_resource_only() -> None:
    auth, _ = authorizer(binding("t", Op.READ))
    assert auth.authorize(ALICE, Op.READ, TOPIC, "t")
    assert not auth.authorize(ALICE, Op.WRITE, TOPIC, "t")
    assert not auth.authorize(ALICE, Op.READ, TOPIC, "t2")
    assert not auth.authorize(BOB, Op.READ, TOPIC, "t")


def test_deny_wins_over_allow_from_any_pattern() -> None:
    auth, _ = authorizer(
        binding("*", Op.ALL),
        binding("secret-", Op.READ, DENY, pattern=PatternType.PREFIXED),
    )
    assert auth.authorize(ALICE, Op.READ, TOPIC, "public")
    assert not auth.authorize(ALICE, Op.READ, TOPIC, "secret-1")
    assert auth.authorize(ALICE, Op.WRITE, TOPIC, "secret-1")


def test_wildcard_principal_and_host() -> None:
    auth, _ = authorizer(
        binding("t", Op.READ, principal="User:*"),
        binding("t", Op.WRITE, host="10.0.0.1"),
        binding("t", Op.READ, DENY, principal="User:*", host="10.0.0.2"),
    )
    assert auth.authorize(ALICE, Op.READ, TOPIC, "t")
    assert not auth.authorize(BOB, Op.READ, TOPIC, "t")  # denied from bob's host
    assert auth.authorize(ALICE, Op.WRITE, TOPIC, "t")
    other_host = RequestContext(ALICE.principal, "10.0.0.9", "PLAINTEXT")
    assert not auth.authorize(other_host, Op.WRITE, TOPIC, "t")


def test_prefixed_covers_names_that_start_with_it_only() -> None:
    auth, _ = authorizer(binding("orders-", Op.WRITE, pattern=PatternType.PREFIXED))
    assert auth.authorize(ALICE, Op.WRITE, TOPIC, "orders-eu")
    assert auth.authorize(ALICE, Op.WRITE, TOPIC, "orders-")
    assert not auth.authorize(ALICE, Op.WRITE, TOPIC, "orders")
    assert not auth.authorize(ALICE, Op.WRITE, TOPIC, "payments")


def test_literal_star_is_every_resource_of_the_type_but_prefixed_star_is_not() -> None:
    auth, _ = authorizer(binding("*", Op.DESCRIBE))
    assert auth.authorize(ALICE, Op.DESCRIBE, TOPIC, "anything")
    assert not auth.authorize(ALICE, Op.DESCRIBE, CLUSTER, "kafka-cluster")
    auth, _ = authorizer(binding("*", Op.DESCRIBE, pattern=PatternType.PREFIXED))
    assert not auth.authorize(ALICE, Op.DESCRIBE, TOPIC, "anything")
    assert auth.authorize(ALICE, Op.DESCRIBE, TOPIC, "*x")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL])
def test_allow_implies_describe(granted: AclOperation) -> None:
    auth, _ = authorizer(binding("t", granted))
    assert auth.authorize(ALICE, Op.DESCRIBE, TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS])
def test_these_do_not_imply_describe(granted: AclOperation) -> None:
    auth, _ = authorizer(binding("t", granted))
    assert not auth.authorize(ALICE, Op.DESCRIBE, TOPIC, "t")


def test_alter_configs_implies_describe_configs_and_not_the_reverse() -> None:
    auth, _ = authorizer(binding("t", Op.ALTER_CONFIGS))
    assert auth.authorize(ALICE, Op.DESCRIBE_CONFIGS, TOPIC, "t")
    auth, _ = authorizer(binding("t", Op.DESCRIBE_CONFIGS))
    assert not auth.authorize(ALICE, Op.ALTER_CONFIGS, TOPIC, "t")


def test_deny_implies_nothing_but_deny_all_denies_everything() -> None:
    auth, _ = authorizer(binding("t", Op.ALL), binding("t", Op.READ, DENY))
    assert auth.authorize(ALICE, Op.DESCRIBE, TOPIC, "t")  # a denied READ leaves DESCRIBE
    assert not auth.authorize(ALICE, Op.READ, TOPIC, "t")
    auth, _ = authorizer(binding("t", Op.ALL), binding("t", Op.ALL, DENY))
    assert not auth.authorize(ALICE, Op.DESCRIBE, TOPIC, "t")


def test_cluster_resource() -> None:
    auth, _ = authorizer(
        binding("kafka-cluster", Op.CLUSTER_ACTION, resource_type=CLUSTER),
    )
    assert auth.authorize(ALICE, Op.CLUSTER_ACTION, CLUSTER)
    assert not auth.authorize(ALICE, Op.ALTER, CLUSTER)
    assert not auth.authorize(BOB, Op.CLUSTER_ACTION, CLUSTER)


def test_removing_acls_takes_their_effect_away() -> None:
    index = AclIndex()
    auth = StandardAuthorizer(AuthorizerConfig(enabled=True), lambda: index)
    prefixed, literal = uuid.uuid4(), uuid.uuid4()
    index.put(prefixed, binding("o", Op.READ, pattern=PatternType.PREFIXED))
    index.put(literal, binding("orders", Op.READ, DENY))
    assert not auth.authorize(ALICE, Op.READ, TOPIC, "orders")
    index.remove(literal)
    assert auth.authorize(ALICE, Op.READ, TOPIC, "orders")
    index.remove(prefixed)
    assert not auth.authorize(ALICE, Op.READ, TOPIC, "orders")
    assert len(index) == 0
    assert list(index.resource_entries(TOPIC, "orders")) == []


def test_index_put_is_idempotent_and_knows_equal_bindings() -> None:
    index = AclIndex()
    acl_id, acl = uuid.uuid4(), binding("t", Op.READ)
    index.put(acl_id, acl)
    index.put(acl_id, acl)
    assert len(index) == 1
    assert index.id_of(binding("t", Op.READ)) == acl_id
    [entries] = list(index.resource_entries(TOPIC, "t"))
    assert entries["User:alice"] == (acl.entry,)


def test_many_acls_on_other_principals_leave_a_check_to_its_own_entries() -> None:
    index = AclIndex(
        {uuid.uuid4(): binding("t", Op.READ, principal=f"User:u{i}") for i in range(200)}
    )
    auth = StandardAuthorizer(AuthorizerConfig(enabled=True), lambda: index)
    assert not auth.authorize(ALICE, Op.READ, TOPIC, "t")
    index.put(uuid.uuid4(), binding("t", Op.READ))
    assert auth.authorize(ALICE, Op.READ, TOPIC, "t")


# ------------------------------------------------------------------------------------ filters

ORDERS_LITERAL = binding("orders", Op.READ)
STAR_LITERAL = binding("*", Op.READ)
ORD_PREFIXED = binding("ord", Op.READ, pattern=PatternType.PREFIXED)
OTHER = binding("payments", Op.WRITE, DENY, principal="User:bob", host="10.0.0.2")
ALL_BINDINGS = [ORDERS_LITERAL, STAR_LITERAL, ORD_PREFIXED, OTHER]


def matched(pattern_filter: ResourcePatternFilter) -> list[AclBinding]:
    f = AclBindingFilter(pattern_filter)
    return [b for b in ALL_BINDINGS if f.matches(b)]


def test_filter_any_name_is_exact_across_pattern_types() -> None:
    assert matched(ResourcePatternFilter(TOPIC, "orders", PatternType.ANY)) == [ORDERS_LITERAL]
    assert matched(ResourcePatternFilter(TOPIC, "ord", PatternType.ANY)) == [ORD_PREFIXED]


def test_filter_match_finds_every_pattern_covering_the_name() -> None:
    assert matched(ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH)) == [
        ORDERS_LITERAL,
        STAR_LITERAL,
        ORD_PREFIXED,
    ]


def test_filter_pattern_type_and_no_name() -> None:
    assert matched(ResourcePatternFilter(TOPIC, None, PatternType.PREFIXED)) == [ORD_PREFIXED]
    assert matched(ResourcePatternFilter(TOPIC, "orders", PatternType.LITERAL)) == [ORDERS_LITERAL]
    assert matched(ResourcePatternFilter()) == ALL_BINDINGS
    assert matched(ResourcePatternFilter(CLUSTER)) == []


def test_entry_filter() -> None:
    f = AclBindingFilter(entry=AccessControlEntryFilter(principal="User:bob"))
    assert [b for b in ALL_BINDINGS if f.matches(b)] == [OTHER]
    f = AclBindingFilter(entry=AccessControlEntryFilter(permission_type=DENY, host="10.0.0.2"))
    assert [b for b in ALL_BINDINGS if f.matches(b)] == [OTHER]
    f = AclBindingFilter(entry=AccessControlEntryFilter(operation=Op.WRITE))
    assert [b for b in ALL_BINDINGS if f.matches(b)] == [OTHER]
    assert AclBindingFilter.exactly(OTHER).matches(OTHER)
    assert not AclBindingFilter.exactly(OTHER).matches(ORDERS_LITERAL)


# ------------------------------------------------------------------------------------ validation


def test_names_parse_in_every_kafka_spelling() -> None:
    assert AclOperation.parse("DescribeConfigs", "operation") is Op.DESCRIBE_CONFIGS
    assert AclOperation.parse("describe-configs", "operation") is Op.DESCRIBE_CONFIGS
    assert AclOperation.parse("CLUSTER_ACTION", "operation") is Op.CLUSTER_ACTION
    assert Op.ALTER_CONFIGS.kafka_name == "AlterConfigs"
    with pytest.raises(ValueError, match="operation 'Fly' is not valid; valid values: Any, All"):
        AclOperation.parse("Fly", "operation")


def test_bad_bindings_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="does not apply to Cluster"):
        binding("kafka-cluster", Op.READ, resource_type=CLUSTER)
    with pytest.raises(ValueError, match="Cluster resource is LITERAL"):
        binding("other", Op.ALTER, resource_type=CLUSTER)
    with pytest.raises(ValueError, match="for filters"):
        binding("t", Op.READ, pattern=PatternType.MATCH)
    with pytest.raises(ValueError, match="Type:Name"):
        binding("t", Op.READ, principal="alice")
    with pytest.raises(ValueError, match="operation cannot be Any"):
        binding("t", Op.ANY)


def test_config_from_properties() -> None:
    config = AuthorizerConfig.from_properties(
        {
            "authorizer.enabled": "true",
            "super.users": "User:admin; User:CN=broker,O=tiered",
            "allow.everyone.if.no.acl.found": "false",
        }
    )
    assert config == AuthorizerConfig(True, frozenset({"User:admin", "User:CN=broker,O=tiered"}))
    assert AuthorizerConfig.from_properties({}) == AuthorizerConfig()
    with pytest.raises(ValueError, match=r"authorizer\.enabled='yes' is not valid"):
        AuthorizerConfig.from_properties({"authorizer.enabled": "yes"})
    with pytest.raises(ValueError, match=r"super\.users='admin' is not valid"):
        AuthorizerConfig.from_properties({"super.users": "admin"})


# ----------------------------------------------------------------------- by resource type


P = PatternType


@pytest.mark.parametrize(
    ("bindings", "config", "expected"),
    [
        ((), {}, False),  # nothing granted
        ((), {"allow_everyone_if_no_acl_found": True}, True),
        ((), {"super_users": frozenset({"User:alice"})}, True),
        ((binding("orders", Op.WRITE),), {}, True),
        ((binding("orders", Op.ALL),), {}, True),
        ((binding("orders", Op.READ),), {}, False),  # another operation
        ((binding("orders", Op.WRITE, principal="User:bob"),), {}, False),
        ((binding("orders", Op.WRITE, principal="User:*"),), {}, True),
        ((binding("orders", Op.WRITE, host="10.9.9.9"),), {}, False),
        ((binding("orders", Op.WRITE), binding("orders", Op.WRITE, DENY)), {}, False),
        (
            (binding("orders", Op.WRITE), binding("ord", Op.WRITE, DENY, pattern=P.PREFIXED)),
            {},
            False,
        ),
        ((binding("orders", Op.WRITE), binding("other", Op.WRITE, DENY)), {}, True),
        (
            (
                binding("ord", Op.WRITE, pattern=P.PREFIXED),
                binding("o", Op.WRITE, DENY, pattern=P.PREFIXED),
            ),
            {},
            False,
        ),
        (
            (binding("ord", Op.WRITE, pattern=P.PREFIXED), binding("orders", Op.WRITE, DENY)),
            {},
            True,
        ),
        ((binding("*", Op.WRITE),), {}, True),
        ((binding("orders", Op.WRITE), binding("*", Op.WRITE, DENY)), {}, False),
        ((binding("kafka-cluster", Op.ALTER, resource_type=CLUSTER),), {}, False),  # not a topic
    ],
)
def test_authorize_by_resource_type_is_kafkas(
    bindings: tuple[AclBinding, ...], config: dict[str, object], expected: bool
) -> None:
    """Kafka's AuthorizerInterfaceDefaultTest: is WRITE allowed on some topic?"""
    auth, _ = authorizer(*bindings, **config)
    assert auth.authorize_by_resource_type(ALICE, Op.WRITE, TOPIC) is expected
