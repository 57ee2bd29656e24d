"""The client side of one SCRAM exchange (RFC 5802), as Kafka's ``ScramSaslClient`` makes it:

    client-first  n,,n=<user>,r=<client nonce>
    server-first  r=<client nonce><server nonce>,s=<salt>,i=<iterations>   (checked)
    client-final  c=biws,r=<both nonces>,p=<proof>
    server-final  v=<server signature>                                     (verified)

The server's signature is verified, so a server that does not know the password is not taken
for the cluster. The password is kept only until the proof is made; errors never quote it.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import secrets

from tiered.security.scram import ScramFormatter, ScramMechanism, encode_saslname

__all__ = ["ScramClientError", "ScramSaslClient"]

_GS2_HEADER = "n,,"
_NONCE_BYTES = 24
_SERVER_FIRST = re.compile(
    r"r=(?P<nonce>[\x21-\x2B\x2D-\x7E]+),s=(?P<salt>[^,]+),i=(?P<i>\d+)(,.*)?"
)
_SERVER_FINAL = re.compile(r"(?:v=(?P<signature>[^,]+)|e=(?P<error>[^,]+))(,.*)?")
# A server asking for more work than this is refused rather than obeyed (Kafka's broker limit).
_MAX_ITERATIONS = 16384


class ScramClientError(Exception):
    """The server's messages break the exchange (or it refused the login)."""


class ScramSaslClient:
    """One login: ``first_message()``, ``final_message(server_first)``,
    ``verify_server_final(server_final)``."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._formatter = ScramFormatter(mechanism)
        self._username = username
        self._password: str | None = password
        self._client_nonce = base64.b64encode(secrets.token_bytes(_NONCE_BYTES)).decode()
        self._client_first_bare = f"n={encode_saslname(username)},r={self._client_nonce}"
        self._server_key: bytes | None = None
        self._auth_message = b""

    def __repr__(self) -> str:
        return f"ScramSaslClient({self.mechanism}, user={self._username!r})"

    def first_message(self) -> bytes:
        return (_GS2_HEADER + self._client_first_bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        match = _SERVER_FIRST.fullmatch(_text(server_first))
        if match is None:
            raise ScramClientError("invalid SCRAM server first message")
        nonce = match["nonce"]
        if not nonce.startswith(self._client_nonce) or nonce == self._client_nonce:
            raise ScramClientError("the SCRAM server's nonce does not extend this client's")
        iterations = int(match["i"])
        if not self.mechanism.min_iterations <= iterations <= _MAX_ITERATIONS:
            raise ScramClientError(
                f"the SCRAM server asks for {iterations} iterations; valid: "
                f"{self.mechanism.min_iterations} to {_MAX_ITERATIONS}"
            )
        try:
            salt = base64.b64decode(match["salt"], validate=True)
        except binascii.Error:
            raise ScramClientError("the SCRAM server's salt is not base64") from None
        if self._password is None:
            raise ScramClientError("this SCRAM exchange has already been used")
        salted = self._formatter.salted_password(self._password, salt, iterations)
        self._password = None
        channel = base64.b64encode(_GS2_HEADER.encode()).decode()
        without_proof = f"c={channel},r={nonce}"
        self._auth_message = ",".join(
            (self._client_first_bare, match.group(0), without_proof)
        ).encode()
        proof = self._formatter.client_proof(salted, self._auth_message)
        self._server_key = self._formatter.server_key(salted)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        match = _SERVER_FINAL.fullmatch(_text(server_final))
        if match is None:
            raise ScramClientError("invalid SCRAM server final message")
        if match["error"] is not None:
            raise ScramClientError(f"the SCRAM server refused the login: {match['error']}")
        if self._server_key is None:
            raise ScramClientError("SCRAM server final message before the client final one")
        expected = self._formatter.server_signature(self._server_key, self._auth_message)
        try:
            signature = base64.b64decode(match["signature"], validate=True)
        except binascii.Error:
            raise ScramClientError("the SCRAM server's signature is not base64") from None
        if not hmac.compare_digest(signature, expected):
            raise ScramClientError(
                "the SCRAM server's signature is wrong: it does not know this user's credential"
            )


def _text(message: bytes) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramClientError("invalid SCRAM message: not UTF-8") from None
