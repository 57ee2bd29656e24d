"""SCRAM user management in plain Python: the controller's ``ScramUsers`` (Kafka's
ScramControlManager rules) over a real KRaft store, and the ``tiered-configs --entity-type
users`` parsing, whose errors never quote a password."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.scram_users import parse_scram_additions, parse_scram_deletions
from controller.leadership import Term
from controller.scram_users import ScramDeletion, ScramUpsertion, ScramUsers
from controller.store.kraft import KRaftMetadataStore
from tiered.errors import ErrorCode, TieredError
from tiered.security.scram import ScramCredential, ScramFormatter, ScramMechanism

SHA512 = ScramMechanism.SCRAM_SHA_512
SHA256 = ScramMechanism.SCRAM_SHA_256


@pytest.fixture
def users(tmp_path: Path) -> Iterator[tuple[ScramUsers, KRaftMetadataStore]]:
    store = KRaftMetadataStore(tmp_path / "metadata")
    epoch = store.elect(1, "127.0.0.1:1", threading.Event())
    assert epoch is not None
    term = Term(1, store)
    term.begin(epoch, store.load())
    try:
        yield ScramUsers(store, term), store
    finally:
        store.close()


def upsertion(
    user: str, password: str = "pw", iterations: int = 4096, mechanism: int = 2
) -> ScramUpsertion:
    salt = b"salt-" + user.encode()
    chosen = ScramMechanism.from_type(mechanism) if mechanism in (1, 2) else SHA512
    salted = ScramFormatter(chosen).salted_password(password, salt, max(iterations, 1))
    return ScramUpsertion(user, mechanism, iterations, salt, salted)


def codes(results: list[tuple[str, TieredError | None]]) -> dict[str, ErrorCode | None]:
    return {user: None if error is None else error.code for user, error in results}


def test_accepted_changes_persist_and_refused_ones_change_nothing(
    users: tuple[ScramUsers, KRaftMetadataStore],
) -> None:
    scram, store = users
    results = scram.alter(
        [ScramDeletion("ghost", 2)],
        [
            upsertion("alice"),
            upsertion("bob", iterations=1024),
            upsertion("carol", iterations=20000),
            upsertion("dave", mechanism=9),
            upsertion(""),
            upsertion("."),
            upsertion("eve"),
            upsertion("eve", mechanism=1),
        ],
    )
    assert codes(results) == {
        "ghost": ErrorCode.RESOURCE_NOT_FOUND,
        "alice": None,
        "bob": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "carol": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "dave": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        ".": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "eve": ErrorCode.DUPLICATE_RESOURCE,
    }
    assert "valid: 4096 to 16384" in str(dict(results)["bob"])
    assert set(store.load().scram_credentials) == {("alice", SHA512)}
    assert scram.describe([]) == [("alice", [(SHA512, 4096)])]
    stored = store.load().scram_credentials[("alice", SHA512)]
    assert stored == ScramCredential.from_password(SHA512, "pw", 4096, b"salt-alice")


def test_describe_named_users_and_delete(users: tuple[ScramUsers, KRaftMetadataStore]) -> None:
    scram, store = users
    scram.alter([], [upsertion("alice", iterations=8192)])
    scram.alter([], [upsertion("alice", mechanism=1)])
    described = scram.describe(["alice", "nobody", "alice"])
    assert described[0] == ("alice", [(SHA256, 4096), (SHA512, 8192)])
    assert isinstance(described[1][1], TieredError)
    assert described[1][1].code is ErrorCode.RESOURCE_NOT_FOUND
    assert isinstance(described[2][1], TieredError)
    assert described[2][1].code is ErrorCode.DUPLICATE_RESOURCE
    assert codes(scram.alter([ScramDeletion("alice", 1)], [])) == {"alice": None}
    assert set(store.load().scram_credentials) == {("alice", SHA512)}


def test_a_standby_answers_not_controller(users: tuple[ScramUsers, KRaftMetadataStore]) -> None:
    scram, store = users
    scram._term.end()
    with pytest.raises(TieredError) as refused:
        scram.alter([], [upsertion("alice")])
    assert refused.value.code is ErrorCode.NOT_CONTROLLER
    assert store.load().scram_credentials == {}


def test_add_config_parses_kafka_configs_forms() -> None:
    [one] = parse_scram_additions("alice", ["SCRAM-SHA-512=[password=p=w]"])
    assert (one.mechanism, one.iterations, one.password) == (SHA512, 4096, "p=w")
    both = parse_scram_additions(
        "alice", ["SCRAM-SHA-256=[iterations=8192,password=a],SCRAM-SHA-512=[password=b]"]
    )
    assert [(u.mechanism, u.iterations, u.password) for u in both] == [
        (SHA256, 8192, "a"),
        (SHA512, 4096, "b"),
    ]
    assert "secret" not in repr(both[0]) and "password=" not in repr(both[0])
    assert [d.mechanism for d in parse_scram_deletions("a", ["SCRAM-SHA-512,SCRAM-SHA-256"])] == [
        SHA512,
        SHA256,
    ]


@pytest.mark.parametrize(
    ("text", "code", "words"),
    [
        ("PLAIN=[password=s3cret]", ErrorCode.INVALID_REQUEST, "valid: SCRAM-SHA-256"),
        ("SCRAM-SHA-512=s3cret", ErrorCode.INVALID_REQUEST, "takes MECHANISM=[password=PW]"),
        ("SCRAM-SHA-512=[secret=s3cret]", ErrorCode.INVALID_REQUEST, "valid: password, iterations"),
        (
            "SCRAM-SHA-512=[iterations=100,password=s3cret]",
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "4096 to 16384",
        ),
        ("SCRAM-SHA-512=[iterations=x,password=s3cret]", ErrorCode.INVALID_REQUEST, "whole number"),
        (
            "SCRAM-SHA-512=[password=]",
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "password of user 'a' is empty",
        ),
        ("SCRAM-SHA-512=[iterations=4096]", ErrorCode.INVALID_REQUEST, "needs a password"),
        (
            "SCRAM-SHA-512=[password=s3cret],SCRAM-SHA-512=[password=s3cret]",
            ErrorCode.INVALID_REQUEST,
            "more than once",
        ),
    ],
)
def test_bad_add_config_never_quotes_the_password(text: str, code: ErrorCode, words: str) -> None:
    with pytest.raises(TieredError) as refused:
        parse_scram_additions("a", [text])
    assert refused.value.code is code
    assert words in refused.value.message
    assert "s3cret" not in str(refused.value)
