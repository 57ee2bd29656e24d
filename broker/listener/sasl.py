"""Who a Kafka connection is: the authentication layer between the socket and the handler.

A ``ConnectionAuthenticator`` is made per connection by the listener's ``Authentication``. It
sees every request before the handler does and knows nothing of sockets, so SASL_PLAINTEXT and
SASL_SSL are the same state machine over a plain or a TLS socket, and SSL sets its principal
from the client certificate the same way.

On a SASL listener it follows Kafka's ``SaslServerAuthenticator``:

- before authentication only ApiVersions (once, and again after an unsupported version),
  SaslHandshake (v1) and then SaslAuthenticate are served; any other request closes the
  connection without an answer, before its body is even decoded, as Kafka does;
- a handshake naming a mechanism not in ``sasl.enabled.mechanisms`` is answered
  UNSUPPORTED_SASL_MECHANISM (33) with the enabled ones, then the connection closes;
- SaslAuthenticate carries the SCRAM messages (``tiered.security.scram``); a failed login is
  answered SASL_AUTHENTICATION_FAILED (58), the same message whether the user exists or not,
  then the connection closes; success makes the principal ``User:NAME``;
- after authentication, and on a listener without SASL, SaslHandshake and SaslAuthenticate are
  answered ILLEGAL_SASL_STATE (34), as Kafka's request handler does (no re-authentication).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload, ResponsePayload

from tiered.kafka.messages import build, response_type_for
from tiered.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from tiered.security.scram import (
    ScramAuthenticationError,
    ScramCredential,
    ScramMechanism,
    ScramSaslServer,
)

__all__ = [
    "API_VERSIONS_KEY",
    "SASL_AUTHENTICATE_KEY",
    "SASL_HANDSHAKE_KEY",
    "Authentication",
    "AuthenticationStep",
    "ConnectionAuthenticator",
    "SaslAuthentication",
    "SaslState",
    "ScramCredentials",
    "parse_enabled_mechanisms",
]

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
SASL_KEYS = frozenset({SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
AUTHENTICATION_FAILED = (
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism {mechanism}"
)

ScramCredentials = Callable[[str, ScramMechanism], "ScramCredential | None"]
"""The stored credential of (user, mechanism), or None: where a broker learnt it."""


def parse_enabled_mechanisms(value: str | None) -> tuple[ScramMechanism, ...]:
    """``sasl.enabled.mechanisms`` (default SCRAM-SHA-512); ValueError naming the key and the
    valid values for a mechanism this broker does not serve (GSSAPI, PLAIN, OAUTHBEARER)."""
    names = [n.strip() for n in (value or "SCRAM-SHA-512").split(",") if n.strip()]
    if not names:
        raise ValueError(
            f"sasl.enabled.mechanisms is empty; valid: {', '.join(ScramMechanism.names())}"
        )
    try:
        return tuple(dict.fromkeys(ScramMechanism.from_name(n) for n in names))
    except ValueError as e:
        raise ValueError(f"sasl.enabled.mechanisms={value!r}: {e}") from None


@dataclass(frozen=True, slots=True)
class AuthenticationStep:
    """The answer to a SASL request; ``close`` once it is sent (a failed or refused login)."""

    response: ResponsePayload
    close: bool = False


class ConnectionAuthenticator:
    """A connection without SASL: its principal is the transport's from the start (ANONYMOUS on
    PLAINTEXT, the client certificate's on SSL), and SASL requests are answered
    ILLEGAL_SASL_STATE."""

    def __init__(self, principal: KafkaPrincipal | None = ANONYMOUS) -> None:
        self.principal: KafkaPrincipal | None = principal

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def admits(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be decoded and served now."""
        return self.authenticated

    def handle(self, request: RequestPayload) -> AuthenticationStep:
        """Answers SaslHandshake, SaslAuthenticate, or (before authentication) ApiVersions'
        effect on the state, which the listener answers itself."""
        return AuthenticationStep(_illegal_state(request, "this listener expects no SASL exchange"))

    def api_versions_answered(self, supported: bool) -> None:
        """The listener answered ApiVersions (``supported``: in a version it serves)."""


class Authentication:
    """How a listener authenticates its connections; this one: by its transport only (nobody on
    PLAINTEXT, the client certificate on SSL)."""

    security_protocol = "PLAINTEXT"

    def connection(
        self, transport_principal: KafkaPrincipal = ANONYMOUS
    ) -> ConnectionAuthenticator:
        """A new connection's authenticator, given who its transport says the client is."""
        return ConnectionAuthenticator(transport_principal)


class SaslState(enum.Enum):
    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


_S = SaslState
# state -> (the api keys served in it, the states it may move to)
_STATES: dict[SaslState, tuple[frozenset[int], frozenset[SaslState]]] = {
    _S.HANDSHAKE_OR_VERSIONS_REQUEST: (
        frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY}),
        frozenset(
            {_S.HANDSHAKE_OR_VERSIONS_REQUEST, _S.HANDSHAKE_REQUEST, _S.AUTHENTICATE, _S.FAILED}
        ),
    ),
    _S.HANDSHAKE_REQUEST: (
        frozenset({SASL_HANDSHAKE_KEY}),
        frozenset({_S.AUTHENTICATE, _S.FAILED}),
    ),
    _S.AUTHENTICATE: (
        frozenset({SASL_AUTHENTICATE_KEY}),
        frozenset({_S.AUTHENTICATE, _S.COMPLETE, _S.FAILED}),
    ),
    _S.COMPLETE: (frozenset(), frozenset()),
    _S.FAILED: (frozenset(), frozenset()),
}


class SaslServerAuthenticator(ConnectionAuthenticator):
    """One connection of a SASL listener (Kafka's ``SaslServerAuthenticator``)."""

    def __init__(self, mechanisms: Sequence[ScramMechanism], credentials: ScramCredentials) -> None:
        super().__init__(principal=None)
        self._mechanisms = tuple(mechanisms)
        self._credentials = credentials
        self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        self._scram: ScramSaslServer | None = None

    def _move(self, to: SaslState) -> None:
        if to not in _STATES[self.state][1]:
            raise AssertionError(f"SASL state {self.state.value} cannot move to {to.value}")
        self.state = to

    def admits(self, api_key: int) -> bool:
        if self.state is SaslState.COMPLETE:
            return True
        return api_key in _STATES[self.state][0]

    def api_versions_answered(self, supported: bool) -> None:
        if self.state is SaslState.HANDSHAKE_OR_VERSIONS_REQUEST and supported:
            self._move(SaslState.HANDSHAKE_REQUEST)

    def handle(self, request: RequestPayload) -> AuthenticationStep:
        if self.state is SaslState.COMPLETE:
            return AuthenticationStep(_illegal_state(request, "the connection is authenticated"))
        if request.__api_key__ == SASL_HANDSHAKE_KEY:
            return self._handshake(request)
        return self._authenticate(request)

    def _handshake(self, request: RequestPayload) -> AuthenticationStep:
        enabled = tuple(m.mechanism_name for m in self._mechanisms)
        asked = str(getattr(request, "mechanism", ""))
        mechanism = next((m for m in self._mechanisms if m.mechanism_name == asked), None)
        if mechanism is None:
            self._move(SaslState.FAILED)
            log.info("SASL handshake asked for mechanism %r; enabled: %s", asked, enabled)
            return AuthenticationStep(
                build(
                    response_type_for(request),
                    error_code=ErrorCode.unsupported_sasl_mechanism,
                    mechanisms=enabled,
                ),
                close=True,
            )
        self._scram = ScramSaslServer(mechanism, lambda user: self._credentials(user, mechanism))
        self._move(SaslState.AUTHENTICATE)
        return AuthenticationStep(
            build(response_type_for(request), error_code=ErrorCode.none, mechanisms=enabled)
        )

    def _authenticate(self, request: RequestPayload) -> AuthenticationStep:
        scram = self._scram
        assert scram is not None
        try:
            challenge = scram.evaluate_response(bytes(getattr(request, "auth_bytes", b"")))
        except ScramAuthenticationError as e:
            self._move(SaslState.FAILED)
            message = (
                str(e) if e.for_client else AUTHENTICATION_FAILED.format(mechanism=scram.mechanism)
            )
            log.info("SASL/%s authentication failed: %s", scram.mechanism, e)
            return AuthenticationStep(
                build(
                    response_type_for(request),
                    error_code=ErrorCode.sasl_authentication_failed,
                    error_message=message,
                    auth_bytes=b"",
                ),
                close=True,
            )
        if scram.is_complete:
            assert scram.username is not None
            self.principal = KafkaPrincipal(USER_TYPE, scram.username)
            self._scram = None
            self._move(SaslState.COMPLETE)
        return AuthenticationStep(
            build(
                response_type_for(request),
                error_code=ErrorCode.none,
                error_message=None,
                auth_bytes=challenge,
            )
        )


class SaslAuthentication(Authentication):
    """A SASL listener's: SCRAM with ``mechanisms``, credentials from ``credentials``."""

    def __init__(
        self,
        mechanisms: Sequence[ScramMechanism],
        credentials: ScramCredentials,
        security_protocol: str = "SASL_PLAINTEXT",
    ) -> None:
        self.mechanisms = tuple(mechanisms)
        self.credentials = credentials
        self.security_protocol = security_protocol

    def connection(
        self, transport_principal: KafkaPrincipal = ANONYMOUS
    ) -> ConnectionAuthenticator:
        """SASL decides the principal; a TLS client certificate (SASL_SSL) does not."""
        return SaslServerAuthenticator(self.mechanisms, self.credentials)


def _illegal_state(request: RequestPayload, why: str) -> ResponsePayload:
    response: ResponsePayload = build(
        response_type_for(request),
        error_code=ErrorCode.illegal_sasl_state,
        error_message=f"Unexpected {type(request).__name__.removesuffix('Request')}: {why}",
        mechanisms=(),
        auth_bytes=b"",
    )
    return response
