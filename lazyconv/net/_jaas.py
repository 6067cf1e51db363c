"""``sasl.jaas.config`` values, read as Kafka reads them (its JaasConfig over a StreamTokenizer).

A value is one login module entry::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="alice" password="alice-secret" user_bob="bob-secret";

Kafka's tokenizer rules, which this module follows:

- every character up to and including the space (0-32) is white space (line ends too);
- ``;`` ends the entry and ``=`` separates an option from its value; both are tokens of their own;
- ``"`` and ``'`` quote a value; inside quotes a backslash escapes: ``\\n``, ``\\t``, ``\\r``,
  ``\\b``, ``\\f``, ``\\a``, ``\\v``, octal ``\\ooo``, and any other character stands for itself
  (``\\"`` is a quote, ``\\\\`` a backslash);
- ``//`` and a lone ``/`` start a comment to the end of the line, ``/* ... */`` a block comment;
- everything else is part of a word (an unquoted value or key: no escapes there).

The control flag is one of ``required``, ``requisite``, ``sufficient``, ``optional`` (any case).
A property holds exactly one login module (Kafka refuses more: "should be 1 module").

Where Kafka differs, deliberately:

- a quoted value that runs to the end of a line or of the text is an error here; Kafka's
  tokenizer silently ends it there (a missing quote would make a password of the rest of the
  line);
- an option given twice is an error here; Kafka keeps the last one.

Errors name the option, never its value: a JAAS line carries passwords.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from lazyconv.errors import ConfigurationError

__all__ = [
    "JaasLoginModule",
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "OAUTHBEARER_LOGIN_MODULE",
    "parse_jaas_config",
    "mask_jaas_config",
    "is_secret_jaas_option",
]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
MASK = "[hidden]"

_QUOTES = "\"'"
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def is_secret_jaas_option(name: str) -> bool:
    """Whether a JAAS option holds a secret: ``password``, a PLAIN server's ``user_<name>``, and
    anything whose name ends in password, secret or token (``clientSecret``, ``unsecuredLoginToken``...)."""
    lowered = name.lower()
    return (lowered.startswith("user_") or lowered.endswith(("password", "secret", "token")))


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "quoted", ";", "="
    text: str
    start: int  # index of the token's first character in the value
    end: int  # index after it (the closing quote included)


@dataclass(frozen=True)
class JaasLoginModule:
    """One login module entry: its class, control flag and options (secrets kept out of repr)."""

    class_name: str
    control_flag: str
    options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    def __repr__(self) -> str:
        shown = {k: (MASK if is_secret_jaas_option(k) else v) for k, v in self.options.items()}
        return f"JaasLoginModule({self.class_name!r}, {self.control_flag!r}, {shown!r})"

    @property
    def plain_users(self) -> dict[str, str]:
        """A PLAIN broker's users: ``user_<name>="<password>"`` options as ``{name: password}``."""
        return {k[len("user_"):]: v for k, v in self.options.items()
                if k.startswith("user_") and len(k) > len("user_")}

    def require_option(self, name: str, where: str) -> str:
        """The option's value, or a :class:`ConfigurationError` naming the option and ``where``."""
        value = self.options.get(name)
        if value is None:
            raise ConfigurationError(f"{where}: the {short_module_name(self.class_name)} entry has "
                                     f"no {name}= option")
        return value


def short_module_name(class_name: str) -> str:
    """``PlainLoginModule`` for ``org.apache...PlainLoginModule`` (for messages)."""
    return class_name.rsplit(".", 1)[-1]


# Option names an error may quote: a malformed line can put a value (a password) where a name
# or a class is expected, so anything else is named by its position only.
_QUOTABLE_OPTION = re.compile(r"(user_[\w.@-]+|username|password|serviceName|tokenauth)")
_QUOTABLE_MODULE = re.compile(r"([A-Za-z_$][\w$]*\.)+[A-Za-z_$][\w$]*LoginModule")


def _option_name(token: _Token) -> str:
    if token.kind == "word" and _QUOTABLE_OPTION.fullmatch(token.text):
        return f"option {token.text!r}"
    return f"the option at character {token.start + 1}"


def _module_name(token: _Token) -> str:
    if token.kind == "word" and _QUOTABLE_MODULE.fullmatch(token.text):
        return f"the login module {short_module_name(token.text)}"
    return f"the login module at character {token.start + 1}"


def _found(token: _Token) -> str:
    return repr(token.text) if token.kind not in ("word", "quoted") else f"a {token.kind} value"


def _tokens(text: str, where: str) -> Iterator[_Token]:
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if ord(c) <= 32:
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                close = text.find("*/", i + 2)
                if close < 0:
                    raise ConfigurationError(f"{where}: a /* comment is never closed")
                i = close + 2
            else:  # "//" or a lone "/": a comment to the end of the line
                i = _line_end(text, i)
        elif c in ";=":
            yield _Token(c, c, i, i + 1)
            i += 1
        elif c in _QUOTES:
            value, end = _quoted(text, i, where)
            yield _Token("quoted", value, i, end)
            i = end
        else:
            start = i
            while i < n and ord(text[i]) > 32 and text[i] not in ";=/\"'":
                i += 1
            yield _Token("word", text[start:i], start, i)


def _line_end(text: str, i: int) -> int:
    ends = [p for p in (text.find("\n", i), text.find("\r", i)) if p >= 0]
    return min(ends) if ends else len(text)


def _quoted(text: str, start: int, where: str) -> tuple[str, int]:
    quote = text[start]
    out: list[str] = []
    i, n = start + 1, len(text)
    while i < n:
        c = text[i]
        if c == quote:
            return "".join(out), i + 1
        if c in "\r\n":
            break
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in "01234567":  # up to three octal digits (at most \377), as StreamTokenizer
                digits = re.match(r"[0-7]{1,3}", text[i + 1:i + 4])
                assert digits is not None
                octal = digits.group()
                if len(octal) == 3 and octal[0] > "3":
                    octal = octal[:2]
                out.append(chr(int(octal, 8)))
                i += 1 + len(octal)
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    raise ConfigurationError(f"{where}: a quoted value opened at character {start + 1} is not "
                             f"closed on its line (a missing {quote})")


def parse_jaas_config(text: str, where: str = "sasl.jaas.config") -> JaasLoginModule:
    """The login module entry of a ``sasl.jaas.config`` value (see the module docstring);
    ``where`` names the setting (``file:line key``) in errors, which never show a value."""
    tokens = list(_tokens(text, where))
    if not tokens:
        raise ConfigurationError(f"{where}: no login module (expected '<LoginModuleClass> "
                                 "required <option>=\"<value>\" ...;')")
    entries: list[JaasLoginModule] = []
    i = 0
    while i < len(tokens):
        module = tokens[i]
        if module.kind not in ("word", "quoted"):
            raise ConfigurationError(f"{where}: expected a login module class at character "
                                     f"{module.start + 1}, found {_found(module)}")
        if i + 1 >= len(tokens) or tokens[i + 1].kind not in ("word", "quoted"):
            raise ConfigurationError(f"{where}: {_module_name(module)} has no control "
                                     "flag (required, requisite, sufficient or optional)")
        flag = tokens[i + 1].text
        if flag.lower() not in CONTROL_FLAGS:
            raise ConfigurationError(f"{where}: invalid login module control flag at character "
                                     f"{tokens[i + 1].start + 1} (required, requisite, "
                                     "sufficient or optional)")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i].kind != ";":
            key = tokens[i]
            if key.kind not in ("word", "quoted"):
                raise ConfigurationError(f"{where}: expected an option name at character "
                                         f"{key.start + 1}, found {_found(key)}")
            if (i + 2 >= len(tokens) or tokens[i + 1].kind != "="
                    or tokens[i + 2].kind not in ("word", "quoted")):
                raise ConfigurationError(f"{where}: value not specified for {_option_name(key)}")
            if key.text in options:
                raise ConfigurationError(f"{where}: {_option_name(key)} is given twice")
            options[key.text] = tokens[i + 2].text
            i += 3
        if i >= len(tokens):
            raise ConfigurationError(f"{where}: the entry of {_module_name(module)} is not "
                                     "terminated by a semicolon")
        i += 1  # the ";"
        entries.append(JaasLoginModule(module.text, flag.lower(), options))
    if len(entries) != 1:
        raise ConfigurationError(f"{where}: {len(entries)} login modules, expected exactly one")
    return entries[0]


def mask_jaas_config(text: str) -> str:
    """``text`` with the value of every secret option (:func:`is_secret_jaas_option`) replaced by
    ``[hidden]``, the rest as written; a value that does not parse is hidden whole."""
    try:
        tokens = list(_tokens(text, "sasl.jaas.config"))
    except ConfigurationError:
        return MASK
    pieces: list[str] = []
    at = 0
    for i, token in enumerate(tokens):
        if (token.kind in ("word", "quoted") and i >= 2 and tokens[i - 1].kind == "="
                and tokens[i - 2].kind in ("word", "quoted")
                and is_secret_jaas_option(tokens[i - 2].text)):
            pieces.append(text[at:token.start])
            pieces.append(f'"{MASK}"')
            at = token.end
    pieces.append(text[at:])
    return "".join(pieces)
