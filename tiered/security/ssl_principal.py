"""The principal of a TLS client certificate, as Kafka's ``DefaultKafkaPrincipalBuilder`` makes it.

The name is the certificate's subject as Java's ``X500Principal.getName()`` spells it (RFC 2253:
the most specific RDN first, ``CN=broker-1,OU=brokers,O=tiered``), passed through
``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``): a comma list of rules tried in
order, the first that matches wins:

- ``DEFAULT``: the distinguished name as it is;
- ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash (lower or
  upper case the result): matches when ``pattern`` matches the whole name, and gives the name with
  every match of ``pattern`` replaced (``$1`` refers to a group; a slash inside is ``\\/``).

When no rule matches, the client is not authenticated (Kafka fails the connection). A client that
presents no certificate (``ssl.client.auth=requested``) is ``User:ANONYMOUS``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509

from tiered.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal

__all__ = [
    "PRINCIPAL_MAPPING_RULES",
    "NoMatchingRuleError",
    "SslPrincipalMapper",
    "distinguished_name",
]

PRINCIPAL_MAPPING_RULES = "ssl.principal.mapping.rules"

# Kafka's rule grammar, verbatim in meaning: a rule's pattern and replacement may hold any
# character but an unescaped slash (commas included), so splitting needs the same expression.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)

# The attribute types Java names by keyword in RFC 2253 output; any other is OID=#<DER hex>.
_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
_ESCAPED = set(',=+<>#;"\\')
_UTF16_TAG = 30  # BMPString
_UTF32_TAG = 28  # UniversalString


class NoMatchingRuleError(Exception):
    """No ``ssl.principal.mapping.rules`` rule applies to a certificate's name."""


def distinguished_name(certificate: x509.Certificate | x509.Name) -> str:
    """The subject (or a name) as Java's ``X500Principal.getName()`` (RFC 2253) gives it."""
    name = certificate.subject if isinstance(certificate, x509.Certificate) else certificate
    return ",".join("+".join(_attribute(a) for a in rdn) for rdn in reversed(name.rdns))


def _attribute(attribute: x509.NameAttribute[str | bytes]) -> str:
    keyword = _KEYWORDS.get(attribute.oid.dotted_string)
    value = attribute.value
    if keyword is None or not isinstance(value, str):
        return f"{attribute.oid.dotted_string}=#{_der_value(attribute).hex()}"
    escaped = "".join(f"\\{c}" if c in _ESCAPED else "\\00" if c == "\0" else c for c in value)
    # Leading and trailing spaces are escaped too (RFC 2253 2.4).
    stripped = escaped.strip(" ")
    lead = len(escaped) - len(escaped.lstrip(" "))
    trail = len(escaped) - len(escaped.rstrip(" ")) if stripped else 0
    space = "\\ "
    return f"{keyword}={space * lead}{stripped}{space * trail}"


def _der_value(attribute: x509.NameAttribute[str | bytes]) -> bytes:
    value = attribute.value
    tag = attribute._type.value  # the ASN.1 string type it was encoded with
    if isinstance(value, bytes):
        content = value
    elif tag == _UTF16_TAG:
        content = value.encode("utf-16-be")
    elif tag == _UTF32_TAG:
        content = value.encode("utf-32-be")
    else:
        content = value.encode()
    size = len(content)
    if size < 0x80:
        length = bytes([size])
    else:
        octets = size.to_bytes((size.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(octets)]) + octets
    return bytes([tag]) + length + content


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        result = self.pattern.sub(self._expand, name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def _expand(self, match: re.Match[str]) -> str:
        """Java's replacement syntax: ``$n`` and ``${name}`` are groups, ``\\x`` is ``x``; a
        ``$n`` past the last group is literal (Kafka escapes those first)."""
        text, groups = self.replacement, match.re.groups
        out: list[str] = []
        i = 0
        while i < len(text):
            c = text[i]
            if c == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
            elif c == "$" and i + 1 < len(text) and text[i + 1] == "{":
                end = text.index("}", i)
                out.append(match.group(text[i + 2 : end]) or "")
                i = end + 1
            elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
                j, ref = i + 2, int(text[i + 1])
                while j < len(text) and text[j].isdigit() and ref * 10 + int(text[j]) <= groups:
                    ref, j = ref * 10 + int(text[j]), j + 1
                out.append(text[i:j] if ref > groups else match.group(ref) or "")
                i = j
            else:
                out.append(c)
                i += 1
        return "".join(out)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``, parsed; ``principal_of`` gives a certificate's
    principal."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        """ValueError naming the key for a rule that does not parse or compile."""
        self.rules_text = rules
        self._rules = [r for r in (_parse(text) for text in _split(rules)) if r is not None]

    @classmethod
    def from_properties(
        cls, values: Mapping[str, str], listener: str | None = None
    ) -> SslPrincipalMapper:
        from tiered.security.tls import listener_property  # noqa: PLC0415 - no cycle at import

        return cls(listener_property(values, PRINCIPAL_MAPPING_RULES, listener) or "DEFAULT")

    def name_of(self, distinguished: str) -> str:
        for rule in self._rules:
            name = rule.apply(distinguished)
            if name is not None:
                return name
        raise NoMatchingRuleError(
            f"no {PRINCIPAL_MAPPING_RULES} rule applies to {distinguished!r} "
            f"(rules: {self.rules_text!r})"
        )

    def principal_of(self, certificate: x509.Certificate | None) -> KafkaPrincipal:
        """``User:<mapped name>``; ANONYMOUS without a certificate; NoMatchingRuleError."""
        if certificate is None:
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE, self.name_of(distinguished_name(certificate)))

    def principal_of_der(self, der: bytes | None) -> KafkaPrincipal:
        return self.principal_of(None if der is None else x509.load_der_x509_certificate(der))


def _split(rules: str) -> list[str]:
    return [m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip())]


def _parse(rule: str) -> _Rule | None:
    match = _RULE_PARSER.match(rule)
    if match is None or match.end() != len(rule):
        raise ValueError(
            f"{PRINCIPAL_MAPPING_RULES}: invalid rule {rule!r}; valid rules: DEFAULT or "
            f"RULE:pattern/replacement/ (optionally /L or /U), comma separated"
        )
    if match.group(1) is not None:
        return _Rule(None)
    if match.group(2) is None:
        return None  # an empty rule, as Kafka ignores them
    try:
        pattern = re.compile(match.group(2))
    except re.error as e:
        raise ValueError(
            f"{PRINCIPAL_MAPPING_RULES}: the pattern of {rule!r} does not compile: {e}"
        ) from None
    return _Rule(pattern, match.group(4), match.group(6))
