"""Who a connection is: Kafka's principal (``User:alice``), and the principal of a client
certificate as Kafka's DefaultKafkaPrincipalBuilder makes it.

For TLS the principal is the certificate subject's distinguished name in Java's
``X500Principal.getName()`` form (RFC 2253: the RDNs in reverse order of the certificate, most
specific first, ``CN=alice,OU=eng,O=example``), mapped by ``ssl.principal.mapping.rules``
(Kafka's SslPrincipalMapper). A connection without a client certificate is ``User:ANONYMOUS``.

Java's RFC 2253 form, which :func:`rfc2253_name` reproduces from the certificate's DER:

- only the RFC 2253 keywords are names (``CN``, ``C``, ``L``, ``ST``, ``O``, ``OU``, ``STREET``,
  ``DC``, ``UID``); any other attribute is its dotted OID and ``#`` + the hex of its DER value
  (so ``emailAddress`` is ``1.2.840.113549.1.9.1=#1611...``);
- a value that is not a DER string type (UTF8, Printable, Teletex, IA5, Universal, BMP) is
  ``#`` + hex too;
- in string values ``, = + < > # ; " \\`` are escaped with a backslash, NUL is ``\\00``, and
  leading or trailing spaces are escaped;
- the attributes of a multi-valued RDN are joined with ``+`` in the certificate's order.

Held to the JDK's own ``X500Principal.getName()`` by a test, with one deliberate difference: a
BMPString value (UTF-16) is decoded as text here, where JDK 17 prints its bytes one by one
(``CN=\\00b\\00m\\00p``), which no mapping rule would want to match.

**Mapping rules** (``ssl.principal.mapping.rules``): a comma-separated list of
``RULE:pattern/replacement/`` (optionally ``/L`` or ``/U`` to lower- or upper-case the result)
and ``DEFAULT`` (the DN itself), tried in order; the first rule whose pattern matches the
*whole* DN gives the name; none matching fails the authentication. In the replacement ``$1``
is a group (Java's syntax; ``\\$`` a literal dollar). A pattern is read as Java reads it by
default: ``\\w``, ``\\d``, ``\\s``, ``\\b`` and case-insensitive matching (``(?i)``) know
ASCII only (Python's defaults know Unicode: ``\\w`` took a Kelvin sign or a Cyrillic letter, and
``(?i)`` took the Kelvin sign for a ``k``, so a subject Kafka leaves to the next rule was mapped
to another principal's name); Java's Unicode flags ``(?u)`` and ``(?U)`` are refused as not
compiling. Where Kafka differs: Kafka applies the replacement with Java's ``replaceAll``,
which for a pattern that also matches the empty string at the end (``(.*)`` without
``^``/``$``) appends the replacement a second time; here the replacement is applied once to
the whole DN, which is what the rule says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lazyconv.errors import AuthenticationError, ConfigurationError

__all__ = [
    "KafkaPrincipal",
    "ANONYMOUS",
    "SslPrincipalMapper",
    "rfc2253_name",
    "DEFAULT_SSL_PRINCIPAL_MAPPING_RULES",
]

DEFAULT_SSL_PRINCIPAL_MAPPING_RULES = "DEFAULT"


@dataclass(frozen=True)
class KafkaPrincipal:
    """A principal as Kafka's ACLs name it: ``type:name`` (``User:alice``)."""

    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls("User", name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")

# -- Java's X500Principal.getName() ----------------------------------------------------------

_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string tags Java prints as text, and how their bytes decode
_STRING_TAGS = {12: "utf-8", 19: "latin-1", 20: "latin-1", 22: "latin-1", 27: "latin-1",
                30: "utf-16-be"}
_ESCAPED = set(',=+<>#;"\\')


class _Der:
    """Just enough DER to walk a Name: tag, length, value, with positions kept."""

    def __init__(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = start
        self.end = len(data) if end is None else end

    def next(self) -> tuple[int, int, int, int]:
        """``(tag, header start, value start, value end)`` of the next element."""
        start = self.pos
        if self.pos + 2 > self.end:
            raise ValueError("truncated DER")
        tag = self.data[self.pos]
        length = self.data[self.pos + 1]
        self.pos += 2
        if length & 0x80:
            count = length & 0x7F
            if count == 0 or count > 4 or self.pos + count > self.end:
                raise ValueError("bad DER length")
            length = int.from_bytes(self.data[self.pos:self.pos + count], "big")
            self.pos += count
        value_start = self.pos
        self.pos += length
        if self.pos > self.end:
            raise ValueError("DER element runs past its container")
        return tag, start, value_start, self.pos

    @property
    def done(self) -> bool:
        return self.pos >= self.end


def _oid(data: bytes) -> str:
    if not data:
        raise ValueError("empty OID")
    parts = [min(data[0] // 40, 2)]
    parts.append(data[0] - 40 * parts[0])
    value = 0
    for byte in data[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(map(str, parts))


def _escape_value(text: str) -> str:
    out = []
    for c in text:
        if c in _ESCAPED:
            out.append("\\" + c)
        elif c == "\0":
            out.append("\\00")
        else:
            out.append(c)
    escaped = "".join(out)
    # leading and trailing spaces (and carriage returns) get a backslash each
    lead = len(escaped) - len(escaped.lstrip(" \r"))
    trail = len(escaped) - len(escaped.rstrip(" \r"))
    if lead == len(escaped):
        return "".join("\\" + c for c in escaped)
    middle = escaped[lead:len(escaped) - trail]
    return ("".join("\\" + c for c in escaped[:lead]) + middle
            + "".join("\\" + c for c in escaped[len(escaped) - trail:]))


def rfc2253_name(name_der: bytes) -> str:
    """Java's ``X500Principal.getName()`` for a DER-encoded X.501 Name (a certificate's
    subject); raises ``ValueError`` for bytes that are not one."""
    outer = _Der(name_der)
    tag, _, start, end = outer.next()
    if tag != 0x30:
        raise ValueError("a Name is a SEQUENCE")
    rdns = _Der(name_der, start, end)
    names = []
    while not rdns.done:
        tag, _, set_start, set_end = rdns.next()
        if tag != 0x31:
            raise ValueError("an RDN is a SET")
        avas = _Der(name_der, set_start, set_end)
        parts = []
        while not avas.done:
            tag, _, ava_start, ava_end = avas.next()
            if tag != 0x30:
                raise ValueError("an attribute is a SEQUENCE")
            fields = _Der(name_der, ava_start, ava_end)
            oid_tag, _, oid_start, oid_end = fields.next()
            if oid_tag != 0x06:
                raise ValueError("an attribute type is an OID")
            oid = _oid(name_der[oid_start:oid_end])
            value_tag, value_header, value_start, value_end = fields.next()
            keyword = _RFC2253_KEYWORDS.get(oid, oid)
            charset = _STRING_TAGS.get(value_tag)
            if keyword is oid or charset is None:
                parts.append(f"{oid if keyword is oid else keyword}="
                             f"#{name_der[value_header:value_end].hex()}")
            else:
                text = name_der[value_start:value_end].decode(charset, "replace")
                parts.append(f"{keyword}={_escape_value(text)}")
        names.append("+".join(parts))
    return ",".join(reversed(names))


# -- ssl.principal.mapping.rules (Kafka's SslPrincipalMapper) ---------------------------------

# a rule: DEFAULT, or RULE:pattern/replacement/[LU] with \-escapes inside pattern and replacement
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\\(.)|\$(\d+)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        result = _expand(m, self.replacement)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _expand(m: re.Match[str], replacement: str) -> str:
    """Java's Matcher replacement syntax: ``$n`` a group (the longest number that names a
    group, as Java reads it), ``\\x`` a literal x."""
    groups = m.re.groups

    def one(ref: re.Match[str]) -> str:
        if ref.group(1) is not None:
            return ref.group(1)
        digits = ref.group(2)
        # Java takes digits while the number still names a group
        number, used = int(digits[0]), 1
        while used < len(digits) and number * 10 + int(digits[used]) <= groups:
            number, used = number * 10 + int(digits[used]), used + 1
        if number > groups:
            # Kafka turns a reference past the last group into literal text ($4 with 3 groups)
            return "$" + digits
        return (m.group(number) or "") + digits[used:]

    return _BACK_REFERENCE.sub(one, replacement)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules`` parsed once; :meth:`name` maps a DN (see the module
    docstring)."""

    def __init__(self, rules: str | None = None) -> None:
        text = (DEFAULT_SSL_PRINCIPAL_MAPPING_RULES if rules is None else rules).strip()
        self.rules_text = text
        self._rules: list[_Rule] = []
        for raw in (m.group(1) for m in _RULE_SPLITTER.finditer(text)):
            m = _RULE_PARSER.match(raw)
            if m is None or m.end() != len(raw):
                raise ConfigurationError(f"ssl.principal.mapping.rules: invalid rule {raw!r}")
            if m.group(1) is not None:
                self._rules.append(_Rule(None))
            elif m.group(2) is not None:
                try:
                    # Java's defaults: \w \d \s \b and (?i) ASCII-only (re.ASCII)
                    pattern = re.compile(m.group(2), re.ASCII)
                except (re.error, ValueError) as exc:  # ValueError: (?u), which ASCII refuses
                    raise ConfigurationError(f"ssl.principal.mapping.rules: the pattern of rule "
                                             f"{raw!r} does not compile: {exc}") from None
                self._rules.append(_Rule(pattern, m.group(3), m.group(4)))
            # an empty rule (",,") is skipped, as Kafka does
        if not self._rules and text:
            raise ConfigurationError(f"ssl.principal.mapping.rules: no rule in {text!r}")

    def __repr__(self) -> str:
        return f"SslPrincipalMapper({self.rules_text!r})"

    def name(self, distinguished_name: str) -> str:
        """The principal name for a DN; :class:`AuthenticationError` when no rule applies."""
        for rule in self._rules:
            result = rule.apply(distinguished_name)
            if result is not None:
                return result
        raise AuthenticationError("no ssl.principal.mapping.rules rule applies to the client "
                                  "certificate's subject")

    def principal(self, certificate_der: bytes | None) -> KafkaPrincipal:
        """The principal of a peer certificate (DER), ``User:ANONYMOUS`` without one."""
        if certificate_der is None:
            return ANONYMOUS
        from cryptography import x509

        try:
            subject = x509.load_der_x509_certificate(certificate_der).subject.public_bytes()
            dn = rfc2253_name(subject)
        except ValueError as exc:
            raise AuthenticationError(f"the client certificate's subject cannot be read: "
                                      f"{exc}") from None
        return KafkaPrincipal.user(self.name(dn))
