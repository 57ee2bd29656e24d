"""SCRAM (``tiered.security.scram``) against RFC 7677's test vector, kafka-python's SCRAM client
and the failures a server must refuse."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from tiered.security.scram import (
    INVALID_CREDENTIALS,
    ScramAuthenticationError,
    ScramCredential,
    ScramFormatter,
    ScramMechanism,
    ScramSaslServer,
    ScramServerState,
    decode_saslname,
    encode_saslname,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3 (user "user", password "pencil").
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_C1 = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_S1 = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_C2 = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_S2 = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_server(credential: ScramCredential | None) -> ScramSaslServer:
    return ScramSaslServer(SHA256, {"user": credential}.get, server_nonce=lambda: RFC_SERVER_NONCE)


def test_formatter_reproduces_the_rfc_7677_proof_and_signature() -> None:
    formatter = ScramFormatter(SHA256)
    salted = formatter.salted_password("pencil", RFC_SALT, 4096)
    auth_message = b"n=user,r=rOprNGfwEbeRWgbNEkqO," + RFC_S1 + b"," + RFC_C2.rpartition(b",p=")[0]
    proof = formatter.client_proof(salted, auth_message)
    assert b"p=" + base64.b64encode(proof) == RFC_C2.rpartition(b",")[2]
    signature = formatter.server_signature(formatter.server_key(salted), auth_message)
    assert b"v=" + base64.b64encode(signature) == RFC_S2


def test_server_completes_the_rfc_7677_exchange() -> None:
    server = rfc_server(ScramCredential.from_password(SHA256, "pencil", 4096, RFC_SALT))
    assert server.evaluate_response(RFC_C1) == RFC_S1
    assert server.evaluate_response(RFC_C2) == RFC_S2
    assert server.is_complete and server.username == "user"


def test_a_wrong_password_fails_at_client_final_with_the_generic_message() -> None:
    server = rfc_server(ScramCredential.from_password(SHA256, "not pencil", 4096, RFC_SALT))
    server.evaluate_response(RFC_C1)
    with pytest.raises(ScramAuthenticationError, match=INVALID_CREDENTIALS):
        server.evaluate_response(RFC_C2)
    assert server.state is ScramServerState.FAILED
    with pytest.raises(ScramAuthenticationError):  # nothing after a failure
        server.evaluate_response(RFC_C2)


def exchange(server: ScramSaslServer, client: ScramClient) -> None:
    client.process_server_first_message(server.evaluate_response(client.first_message()))
    client.process_server_final_message(server.evaluate_response(client.final_message()))


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_kafka_python_client_authenticates(mechanism: ScramMechanism) -> None:
    credential = ScramCredential.from_password(mechanism, "alice-secret")
    server = ScramSaslServer(mechanism, {"alice": credential}.get)
    exchange(server, ScramClient("alice", "alice-secret", mechanism.mechanism_name))
    assert server.is_complete and server.username == "alice"


def test_credential_from_salted_password_is_what_the_client_derives() -> None:
    """AlterUserScramCredentials carries the client's salted password: the server's keys from
    it authenticate the same password."""
    formatter = ScramFormatter(SHA512)
    salted = formatter.salted_password("pw", b"salt-bytes", 8192)
    credential = ScramCredential.from_salted_password(SHA512, b"salt-bytes", salted, 8192)
    assert credential == ScramCredential.from_password(SHA512, "pw", 8192, b"salt-bytes")
    server = ScramSaslServer(SHA512, {"bob": credential}.get)
    exchange(server, ScramClient("bob", "pw", "SCRAM-SHA-512"))
    assert server.is_complete


def test_unknown_user_and_wrong_password_look_the_same_until_the_end() -> None:
    """Both get a server-first (a stable salt for the unknown name) and the same failure."""
    known = ScramCredential.from_password(SHA512, "right")
    failures = []
    salts = []
    for user in ("alice", "nobody", "nobody"):
        server = ScramSaslServer(SHA512, {"alice": known}.get)
        client = ScramClient(user, "wrong", "SCRAM-SHA-512")
        first = server.evaluate_response(client.first_message())
        salts.append(dict(p.split("=", 1) for p in first.decode().split(","))["s"])
        client.process_server_first_message(first)
        with pytest.raises(ScramAuthenticationError) as failed:
            server.evaluate_response(client.final_message())
        failures.append(str(failed.value))
    assert failures == [INVALID_CREDENTIALS] * 3
    assert salts[1] == salts[2]  # asking twice for an unknown name shows one salt


def test_a_credential_below_the_minimum_iterations_is_refused() -> None:
    weak = ScramCredential.from_password(SHA512, "pw", iterations=1024)
    server = ScramSaslServer(SHA512, {"weak": weak}.get)
    with pytest.raises(ScramAuthenticationError, match=INVALID_CREDENTIALS):
        exchange(server, ScramClient("weak", "pw", "SCRAM-SHA-512"))


def test_nonce_and_channel_binding_must_match() -> None:
    credential = ScramCredential.from_password(SHA512, "pw")
    for tamper in (
        lambda final: final.replace(b",r=", b",r=X", 1),  # another nonce
        lambda final: final.replace(b"c=biws", b"c=eSws"),  # "y,,": channel binding claimed
    ):
        server = ScramSaslServer(SHA512, {"u": credential}.get)
        client = ScramClient("u", "pw", "SCRAM-SHA-512")
        client.process_server_first_message(server.evaluate_response(client.first_message()))
        with pytest.raises(ScramAuthenticationError, match=INVALID_CREDENTIALS):
            server.evaluate_response(tamper(client.final_message()))


@pytest.mark.parametrize(
    ("first", "message"),
    [
        (b"n,,n=u,r=abc,tokenauth=true", "tokenauth"),
        (b"n,a=other,n=u,r=abc", "authorization id"),
        (b"y,,n=u,r=abc", "client first message"),  # channel binding is not offered
        (b"n,,m=ext,n=u,r=abc", "client first message"),  # a mandatory extension
        (b"n,,n=u=41,r=abc", "client first message"),  # a bad escape
        (b"\xff\xfe", "UTF-8"),
    ],
)
def test_bad_client_first_messages_are_refused(first: bytes, message: str) -> None:
    server = ScramSaslServer(SHA512, {"u": ScramCredential.from_password(SHA512, "pw")}.get)
    with pytest.raises(ScramAuthenticationError, match=message):
        server.evaluate_response(first)
    assert server.state is ScramServerState.FAILED


def test_other_extensions_are_ignored() -> None:
    server = ScramSaslServer(SHA512, {"u": ScramCredential.from_password(SHA512, "pw")}.get)
    assert server.evaluate_response(b"n,,n=u,r=abc,tokenauth=false,foo=bar").startswith(b"r=abc")


def test_saslname_escapes_round_trip() -> None:
    assert encode_saslname("a,b=c") == "a=2Cb=3Dc"
    assert decode_saslname("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ValueError):
        decode_saslname("a=41")


def test_credential_config_value_round_trips_and_hides_secrets() -> None:
    credential = ScramCredential.from_password(SHA512, "pw", 4096)
    text = credential.to_config_value()
    assert text.startswith("salt=") and text.endswith(",iterations=4096")
    assert ScramCredential.from_config_value(text) == credential
    assert repr(credential) == "ScramCredential(iterations=4096)"
    with pytest.raises(ValueError, match="lacks stored_key"):
        ScramCredential.from_config_value("salt=AA==,server_key=AA==,iterations=4096")


def test_mechanisms_by_name_and_type() -> None:
    assert ScramMechanism.from_name("scram-sha-512") is SHA512
    assert ScramMechanism.from_type(1) is SHA256
    with pytest.raises(ValueError, match="valid: SCRAM-SHA-256, SCRAM-SHA-512"):
        ScramMechanism.from_name("PLAIN")
    with pytest.raises(ValueError, match="unknown SCRAM mechanism type 0"):
        ScramMechanism.from_type(0)


@pytest.mark.parametrize(("repeated", "accepted"), [(True, True), (False, False)])
def test_librdkafka_before_2_6_1_repeating_its_nonce_is_accepted(
    repeated: bool, accepted: bool
) -> None:
    """Debian's kcat (librdkafka 2.0) sends r=<client nonce><client nonce><server nonce>, as
    Kafka 3.9 accepted; any other nonce is still refused."""
    salt = b"salt-of-carol"
    credential = ScramCredential.from_password(SHA512, "pw", 4096, salt)
    server = ScramSaslServer(SHA512, {"carol": credential}.get)
    first_bare = "n=carol,r=cnonce"
    server_first = server.evaluate_response(f"n,,{first_bare}".encode()).decode()
    nonce = dict(part.split("=", 1) for part in server_first.split(","))["r"]
    sent = ("cnonce" if repeated else "other") + nonce
    without_proof = f"c=biws,r={sent}"
    formatter = ScramFormatter(SHA512)
    auth_message = ",".join((first_bare, server_first, without_proof)).encode()
    proof = formatter.client_proof(formatter.salted_password("pw", salt, 4096), auth_message)
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    if accepted:
        assert server.evaluate_response(final).startswith(b"v=")
    else:
        with pytest.raises(ScramAuthenticationError, match=INVALID_CREDENTIALS):
            server.evaluate_response(final)
