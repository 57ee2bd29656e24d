"""SCRAM (RFC 5802, with RFC 7677's SHA-256 and Kafka's SHA-512) as Kafka implements it: the
mechanisms (``ScramMechanism``), the key derivations (``ScramFormatter``), the stored credential
(``ScramCredential``: salt, stored key, server key, iterations; never the password) and the
server side of one exchange (``ScramSaslServer``).

The exchange, on the server::

    client-first  n,,n=alice,r=<client nonce>[,ext=...]
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=biws,r=<both nonces>,p=<base64 proof>
    server-final  v=<base64 server signature>

Proofs are compared in constant time. An unknown user is not refused at client-first, as Kafka
does: the server answers with a salt derived from the name and fails at client-final with the
message a wrong password gets (RFC 5802 section 9), so neither the step nor the message tells
whether the user exists. The ``tokenauth`` extension (Kafka's delegation tokens) is refused.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_ITERATIONS",
    "INVALID_CREDENTIALS",
    "MAX_ITERATIONS",
    "CredentialLookup",
    "ScramAuthenticationError",
    "ScramCredential",
    "ScramFormatter",
    "ScramMechanism",
    "ScramSaslServer",
    "ScramServerState",
    "decode_saslname",
    "encode_saslname",
]

DEFAULT_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # Kafka's ScramControlManager.MAX_ITERATIONS
INVALID_CREDENTIALS = "Authentication failed: Invalid user credentials"
TOKEN_AUTH_EXTENSION = "tokenauth"


class ScramMechanism(enum.Enum):
    """Kafka's SCRAM mechanisms: the wire type (AlterUserScramCredentials' ``mechanism``), the
    SASL name, the hash, and the fewest iterations a credential may have."""

    SCRAM_SHA_256 = (1, "SCRAM-SHA-256", "sha256")
    SCRAM_SHA_512 = (2, "SCRAM-SHA-512", "sha512")

    def __init__(self, type_id: int, mechanism_name: str, hash_name: str) -> None:
        self.type_id = type_id
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        self.min_iterations = DEFAULT_ITERATIONS

    def __str__(self) -> str:
        return self.mechanism_name

    @property
    def digest_size(self) -> int:
        """Bytes of the hash: of a salted password, a stored key and a server key."""
        return hashlib.new(self.hash_name).digest_size

    @classmethod
    def names(cls) -> list[str]:
        return [m.mechanism_name for m in cls]

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """``ValueError`` naming the valid mechanisms for any other name."""
        for mechanism in cls:
            if mechanism.mechanism_name == name.strip().upper():
                return mechanism
        raise ValueError(f"unknown SCRAM mechanism {name!r}; valid: {', '.join(cls.names())}")

    @classmethod
    def from_type(cls, type_id: int) -> ScramMechanism:
        """``ValueError`` for a wire type other than 1 (SHA-256) or 2 (SHA-512)."""
        for mechanism in cls:
            if mechanism.type_id == type_id:
                return mechanism
        raise ValueError(
            f"unknown SCRAM mechanism type {type_id}; valid: "
            + ", ".join(f"{m.type_id} ({m.mechanism_name})" for m in cls)
        )


class ScramFormatter:
    """The derivations of RFC 5802 section 3 for one mechanism (Kafka's ``ScramFormatter``).
    Passwords are hashed as their UTF-8 bytes, as Kafka does (no SASLprep)."""

    def __init__(self, mechanism: ScramMechanism) -> None:
        self.mechanism = mechanism

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.mechanism.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.mechanism.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i): PBKDF2 with HMAC of the mechanism's hash."""
        return hashlib.pbkdf2_hmac(self.mechanism.hash_name, password.encode(), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def stored_key(self, client_key: bytes) -> bytes:
        return self.hash(client_key)

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")

    def client_signature(self, stored_key: bytes, auth_message: bytes) -> bytes:
        return self.hmac(stored_key, auth_message)

    def server_signature(self, server_key: bytes, auth_message: bytes) -> bytes:
        return self.hmac(server_key, auth_message)

    def client_proof(self, salted_password: bytes, auth_message: bytes) -> bytes:
        """What a client sends: ClientKey XOR ClientSignature (for tests and clients)."""
        client_key = self.client_key(salted_password)
        return _xor(client_key, self.client_signature(self.stored_key(client_key), auth_message))

    def stored_key_of_proof(self, proof: bytes, stored_key: bytes, auth_message: bytes) -> bytes:
        """H(proof XOR ClientSignature): equals the stored key iff the proof is right."""
        signature = self.client_signature(stored_key, auth_message)
        if len(proof) != len(signature):
            return b""
        return self.hash(_xor(proof, signature))


def _xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValueError(f"{what} is not base64") from None


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a server keeps of a SCRAM user (Kafka's ``ScramCredential``): never the password.
    Its repr hides everything but the iterations."""

    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """What AlterUserScramCredentials carries (the client salted the password)."""
        formatter = ScramFormatter(mechanism)
        return cls(
            salt=bytes(salt),
            stored_key=formatter.stored_key(formatter.client_key(salted_password)),
            server_key=formatter.server_key(salted_password),
            iterations=iterations,
        )

    @classmethod
    def from_password(
        cls,
        mechanism: ScramMechanism,
        password: str,
        iterations: int = DEFAULT_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        """A new credential with a random 32-byte salt (unless given)."""
        salt = os.urandom(32) if salt is None else salt
        salted = ScramFormatter(mechanism).salted_password(password, salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def to_config_value(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString``:
        ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N``."""
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_config_value(cls, text: str) -> ScramCredential:
        """The inverse of ``to_config_value``; ``ValueError`` naming the missing or bad part
        (never quoting the value)."""
        parts: dict[str, str] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(
                    "a SCRAM credential is salt=...,stored_key=...,server_key=...,iterations=N"
                )
            parts[key.strip()] = value.strip()
        missing = [k for k in ("salt", "stored_key", "server_key", "iterations") if k not in parts]
        if missing:
            raise ValueError(f"a SCRAM credential lacks {', '.join(missing)}")
        if not parts["iterations"].isdigit():
            raise ValueError("a SCRAM credential's iterations is not a number")
        return cls(
            salt=_unb64(parts["salt"], "salt"),
            stored_key=_unb64(parts["stored_key"], "stored_key"),
            server_key=_unb64(parts["server_key"], "server_key"),
            iterations=int(parts["iterations"]),
        )


def encode_saslname(username: str) -> str:
    """RFC 5802's saslname: ``,`` as ``=2C`` and ``=`` as ``=3D``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def decode_saslname(saslname: str) -> str:
    """``ValueError`` for an ``=`` that starts neither ``=2C`` nor ``=3D``."""
    if re.search(r"=(?!2C|3D)", saslname):
        raise ValueError("invalid escape in the SCRAM user name")
    return saslname.replace("=2C", ",").replace("=3D", "=")


# RFC 5802 section 7. Kafka restricts names to ASCII; RFC's UTF-8 is accepted here.
_SASLNAME = r"(?:[^=,\x00]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"  # printable ASCII but ","
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_EXTENSIONS = r"(?:,[A-Za-z]+=[^,]*)*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})"
)

CredentialLookup = Callable[[str], "ScramCredential | None"]
"""The stored credential of a user for the server's mechanism, or None."""


class ScramAuthenticationError(Exception):
    """The exchange failed. ``for_client`` (Kafka's SaslAuthenticationException): the message
    reveals nothing about the user and may be sent to the client; otherwise (Kafka's
    SaslException) the client is told one fixed message."""

    def __init__(self, message: str, *, for_client: bool = False) -> None:
        super().__init__(message)
        self.for_client = for_client


class ScramServerState(enum.Enum):
    RECEIVE_CLIENT_FIRST_MESSAGE = "RECEIVE_CLIENT_FIRST_MESSAGE"
    RECEIVE_CLIENT_FINAL_MESSAGE = "RECEIVE_CLIENT_FINAL_MESSAGE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


_S = ScramServerState
_TRANSITIONS: dict[ScramServerState, frozenset[ScramServerState]] = {
    _S.RECEIVE_CLIENT_FIRST_MESSAGE: frozenset({_S.RECEIVE_CLIENT_FINAL_MESSAGE, _S.FAILED}),
    _S.RECEIVE_CLIENT_FINAL_MESSAGE: frozenset({_S.COMPLETE, _S.FAILED}),
    _S.COMPLETE: frozenset(),
    _S.FAILED: frozenset(),
}

# Keys the salts of unknown users: stable for the life of the process, so that asking twice
# for one unknown name shows the same salt, as a real user's does.
_UNKNOWN_USER_KEY = os.urandom(32)


class ScramSaslServer:
    """One SCRAM exchange on the server (Kafka's ``ScramSaslServer``). ``evaluate_response``
    takes each client message and returns the server's; it raises ``ScramAuthenticationError``
    (and the exchange is FAILED) when the client cannot be authenticated. Not thread-safe: one
    connection's messages come one at a time."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        credentials: CredentialLookup,
        server_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        self.mechanism = mechanism
        self._server_nonce = server_nonce
        self._formatter = ScramFormatter(mechanism)
        self._credentials = credentials
        self.state = ScramServerState.RECEIVE_CLIENT_FIRST_MESSAGE
        self.username: str | None = None  # once COMPLETE: who authenticated
        self._credential: ScramCredential | None = None
        self._known_user = False
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._client_nonce = ""

    @property
    def is_complete(self) -> bool:
        return self.state is ScramServerState.COMPLETE

    def _move(self, to: ScramServerState) -> None:
        if to not in _TRANSITIONS[self.state]:
            raise ScramAuthenticationError(f"Unexpected SCRAM message in state {self.state.value}")
        self.state = to

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            if self.state is ScramServerState.RECEIVE_CLIENT_FIRST_MESSAGE:
                challenge = self._client_first(response)
                self._move(ScramServerState.RECEIVE_CLIENT_FINAL_MESSAGE)
                return challenge
            if self.state is ScramServerState.RECEIVE_CLIENT_FINAL_MESSAGE:
                final = self._client_final(response)
                self._move(ScramServerState.COMPLETE)
                return final
            raise ScramAuthenticationError(f"Unexpected SCRAM message in state {self.state.value}")
        except ScramAuthenticationError:
            self._forget()
            self.state = ScramServerState.FAILED
            raise

    def _client_first(self, response: bytes) -> bytes:
        match = _CLIENT_FIRST.fullmatch(_text(response))
        if match is None:
            raise ScramAuthenticationError("Invalid SCRAM client first message")
        extensions = _extensions(match["extensions"])
        if extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            raise ScramAuthenticationError(
                "Authentication failed: delegation tokens (the tokenauth extension) are not "
                "supported",
                for_client=True,
            )
        try:
            username = decode_saslname(match["saslname"])
            authzid = decode_saslname(match["authzid"]) if match["authzid"] else ""
        except ValueError:
            raise ScramAuthenticationError("Invalid SCRAM client first message") from None
        if authzid and authzid != username:
            raise ScramAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username",
                for_client=True,
            )
        credential = self._credentials(username)
        self._known_user = (
            credential is not None and credential.iterations >= self.mechanism.min_iterations
        )
        if credential is None or not self._known_user:
            credential = self._unknown_user_credential(username)
        self.username = username
        self._credential = credential
        self._gs2_header = match["gs2"]
        self._client_first_bare = match["bare"]
        self._client_nonce = match["nonce"]
        self._nonce = match["nonce"] + self._server_nonce()
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode()

    def _unknown_user_credential(self, username: str) -> ScramCredential:
        """A credential no password matches, with a salt that is the same at every attempt."""
        salt = hmac.new(_UNKNOWN_USER_KEY, username.encode(), "sha256").digest()
        return ScramCredential(
            salt=salt,
            stored_key=os.urandom(self.mechanism.digest_size),
            server_key=os.urandom(self.mechanism.digest_size),
            iterations=DEFAULT_ITERATIONS,
        )

    def _client_final(self, response: bytes) -> bytes:
        credential = self._credential
        assert credential is not None
        match = _CLIENT_FINAL.fullmatch(_text(response))
        if match is None:
            raise ScramAuthenticationError("Invalid SCRAM client final message")
        try:
            channel = _unb64(match["channel"], "channel binding")
            proof = _unb64(match["proof"], "proof")
        except ValueError:
            raise ScramAuthenticationError("Invalid SCRAM client final message") from None
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, match["without_proof"])
        ).encode()
        # Every check runs whatever the earlier ones found, and they are combined at the end:
        # which one failed takes no time to tell.
        # librdkafka before 2.6.1 puts its own nonce once more before the exchange's (its issue
        # 4895); Kafka before 4.0 took it, and Debian's kcat still sends it. The whole exchange's
        # nonce is in it all the same, so a replayed message fails as before.
        sent = match["nonce"].encode()
        nonce_ok = hmac.compare_digest(sent, self._nonce.encode()) | hmac.compare_digest(
            sent, (self._client_nonce + self._nonce).encode()
        )
        channel_ok = hmac.compare_digest(channel, self._gs2_header.encode())
        computed = self._formatter.stored_key_of_proof(proof, credential.stored_key, auth_message)
        proof_ok = hmac.compare_digest(computed, credential.stored_key)
        if not (nonce_ok & channel_ok & proof_ok & self._known_user):
            raise ScramAuthenticationError(INVALID_CREDENTIALS)
        signature = self._formatter.server_signature(credential.server_key, auth_message)
        self._forget()
        return f"v={_b64(signature)}".encode()

    def _forget(self) -> None:
        self._credential = None
        self._client_first_bare = self._server_first = self._nonce = self._client_nonce = ""


def _text(message: bytes) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramAuthenticationError("Invalid SCRAM message: not UTF-8") from None


def _extensions(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in text.split(",")[1:]:
        key, _, value = item.partition("=")
        found[key] = value
    return found
