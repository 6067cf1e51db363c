"""Java ``.properties`` files as Kafka reads them, secrets from the environment and from files,
and which settings are secrets (for ``--check-config``'s masked listing).

**Syntax** (``java.util.Properties.load``, which Kafka's ``Utils.loadProps`` uses):

- a *natural line* ends at ``\\n``, ``\\r`` or ``\\r\\n``; a line whose first non-blank character
  is ``#`` or ``!`` is a comment, a blank line is skipped;
- a line ending in an odd number of backslashes continues on the next one (whose leading blanks
  are dropped): one *logical line*;
- the key runs to the first unescaped ``=``, ``:`` or blank (space, tab, form feed); blanks
  around the separator are skipped, and a separator may be missing (``key value``);
- in keys and values ``\\t``, ``\\n``, ``\\r``, ``\\f`` and ``\\uXXXX`` are escapes, and a
  backslash before any other character stands for that character (``\\=``, ``\\:``, ``\\ ``,
  ``\\\\``);
- a key given twice: the last one counts (Java's rule).

**References** in values (Kafka's ConfigTransformer syntax ``${provider:[path:]key}``):

- ``${env:NAME}``: the environment variable (Kafka's EnvVarConfigProvider);
- ``${file:PATH:KEY}``: ``KEY`` of the properties file ``PATH`` (Kafka's FileConfigProvider);
- ``${file:PATH}``: the whole content of the file ``PATH``, one trailing line end removed (a
  password file, a PEM key);

a relative ``PATH`` is taken from the folder of the file that names it. An unset variable, a
missing file or key, and any other provider are errors naming the file and line. A referenced
file is read up to 1 MiB (a password, a key or a few certificates) and a properties file up to
16 MiB: a larger one (or a device that never ends, ``/dev/zero``) is an error naming the setting
and the path, never its content.

**Where this differs from Kafka, deliberately:** files are read as UTF-8 (Java's
``Properties.load(InputStream)`` reads ISO-8859-1, so a non-ASCII password written in an editor
reaches Kafka as mojibake); a malformed ``\\uXXXX`` is an error naming its line; the ``env``
and ``file`` providers need no ``config.providers`` declaration, and an unknown provider is an
error, not left as literal text.

**Secrets** (:func:`is_secret_key`): ``ssl.*password*`` (key, key store and trust store
passwords), an inline ``ssl.keystore.key``, keys ending in ``password``, ``secret`` or ``token``,
and in ``sasl.jaas.config`` values the ``password=`` and ``user_<name>=`` options
(:func:`mask_value`). Nothing here logs or raises with a value.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from lazyconv.errors import ConfigurationError
from lazyconv.net._jaas import MASK, mask_jaas_config

__all__ = [
    "Property",
    "Properties",
    "parse_properties",
    "load_properties",
    "resolve_references",
    "is_secret_key",
    "mask_value",
    "did_you_mean",
]

_BLANKS = " \t\f"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
# Kafka's ConfigTransformer pattern: ${provider:[path:]key}
_REFERENCE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")
_MAX_REFERENCED_FILE = 1 << 20  # a password or key file, never a data file
_MAX_PROPERTIES_FILE = 16 << 20  # a settings file; more is not one (or never ends)


@dataclass(frozen=True)
class Property:
    """One setting: its key and value and where it was given (``source`` a file path or a label
    such as ``--override``; ``line`` the first line of its logical line, 0 when not from a file).

    ``raw_value`` is the value as written, before ``${...}`` references were resolved (what an
    error may show: never the resolved secret)."""

    key: str
    value: str
    source: str
    line: int = 0
    raw_value: str | None = None

    @property
    def where(self) -> str:
        """``file:line`` (or the source alone)."""
        return f"{self.source}:{self.line}" if self.line else self.source

    @property
    def shown(self) -> str:
        """The value as it may be printed: secrets masked (:func:`mask_value`), and a value
        that came through a ``${...}`` reference as written, whatever its key."""
        if self.raw_value is not None and self.raw_value != self.value:
            return mask_value(self.key, self.raw_value)
        return mask_value(self.key, self.value)

    def __repr__(self) -> str:
        return f"Property({self.key!r}, {self.shown!r}, {self.where!r})"


class Properties(Mapping[str, str]):
    """Settings by key, each remembering where it came from (:meth:`entry`, :meth:`where`).

    Later entries replace earlier ones with the same key, so ``Properties([*file, *overrides])``
    lets the overrides win."""

    def __init__(self, entries: Iterable[Property] = ()) -> None:
        self._entries: dict[str, Property] = {}
        for entry in entries:
            self._entries.pop(entry.key, None)  # keep the order of the winning entry
            self._entries[entry.key] = entry

    def __getitem__(self, key: str) -> str:
        return self._entries[key].value

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Properties({list(self._entries.values())!r})"

    def entry(self, key: str) -> Property:
        """The :class:`Property` for ``key`` (KeyError when absent)."""
        return self._entries[key]

    def entries(self) -> list[Property]:
        """Every property, in the order given."""
        return list(self._entries.values())

    def where(self, key: str) -> str:
        """Where ``key`` was set (``file:line``), for messages."""
        return self._entries[key].where

    def merged(self, other: Iterable[Property]) -> Properties:
        """A copy with ``other`` applied on top."""
        return Properties([*self._entries.values(), *other])

    @classmethod
    def from_mapping(cls, values: Mapping[str, str], source: str) -> Properties:
        """Settings given as a dict (CLI overrides), each with ``source`` as its origin."""
        return cls(Property(str(k), str(v), source) for k, v in values.items())

    def describe(self, masked: bool = True) -> list[str]:
        """``key=value`` lines sorted by key, as :attr:`Property.shown` unless ``masked`` is
        False."""
        return [f"{key}={self._entries[key].shown if masked else self[key]}"
                for key in sorted(self._entries)]


# -- syntax --------------------------------------------------------------------------------


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(first line number, logical line)`` for every line that is not blank or a comment."""
    natural = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(natural):
        number = i + 1
        piece = natural[i].lstrip(_BLANKS)
        i += 1
        if not piece or piece[0] in "#!":
            continue
        line = ""
        while True:
            # Java's LineReader: a comment character where the logical line is still empty is
            # a comment, even on a continued line ("\" alone, then "#..."); a continued line
            # that is empty ends the logical line
            if not line and piece[:1] in ("#", "!"):
                break
            continued = _continues(piece)
            line += piece[:-1] if continued else piece
            if not continued or i >= len(natural):
                break
            piece = natural[i].lstrip(_BLANKS)
            i += 1
            if not piece:
                break
        if line:
            yield number, line


def _continues(piece: str) -> bool:
    slashes = len(piece) - len(piece.rstrip("\\"))
    return slashes % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    key_end, value_start, has_separator, escaped = len(line), len(line), False, False
    for i, c in enumerate(line):
        if not escaped and c in "=:":
            key_end, value_start, has_separator = i, i + 1, True
            break
        if not escaped and c in _BLANKS:
            key_end, value_start = i, i + 1
            break
        escaped = (not escaped) if c == "\\" else False
    while value_start < len(line):
        c = line[value_start]
        if c not in _BLANKS:
            if not has_separator and c in "=:":
                has_separator = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(text: str, where: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigurationError(f"{where}: malformed \\uXXXX escape (four hex digits "
                                         "must follow \\u)")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_SIMPLE_ESCAPES.get(nxt, nxt))
            i += 2
    # \uD83D\uDE00: a surrogate pair written as two escapes is one character
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def parse_properties(text: str, source: str = "<string>") -> list[Property]:
    """The entries of a properties text, in order, unresolved (``${...}`` kept as written)."""
    entries = []
    for number, line in _logical_lines(text):
        where = f"{source}:{number}"
        raw_key, raw_value = _split_key_value(line)
        key = _unescape(raw_key, where)
        value = _unescape(raw_value, where)
        entries.append(Property(key, value, source, number, value))
    return entries


def _read_text(path: Path, what: str, limit: int) -> str:
    """``path``'s text (UTF-8), at most ``limit`` bytes read: a larger file, or one that never
    ends (``/dev/zero``, a FIFO fed forever), is refused after ``limit + 1`` bytes."""
    try:
        with open(path, "rb") as file:
            data = file.read(limit + 1)
    except FileNotFoundError:
        raise ConfigurationError(f"{what}: {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigurationError(f"{what}: {path} is a folder, not a file") from None
    except OSError as exc:
        raise ConfigurationError(f"{what}: {path} cannot be read ({exc.strerror})") from None
    if len(data) > limit:
        raise ConfigurationError(f"{what}: {path} is larger than {limit >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ConfigurationError(f"{path}:{line}: not valid UTF-8 (byte {exc.start})") from None


# -- references ----------------------------------------------------------------------------


def resolve_references(value: str, where: str, *, base_dir: Path | None = None,
                       environ: Mapping[str, str] | None = None) -> str:
    """``value`` with every ``${env:NAME}``, ``${file:PATH}`` and ``${file:PATH:KEY}`` replaced
    (see the module docstring); ``where`` (``file:line key``) heads every error."""
    env = os.environ if environ is None else environ

    def replace(match: re.Match[str]) -> str:
        provider, path, key = match.group(1), match.group(2), match.group(3)
        if provider == "env":
            if path is not None:
                raise ConfigurationError(f"{where}: ${{env:NAME}} takes no path "
                                         f"({match.group(0)})")
            if key not in env:
                raise ConfigurationError(f"{where}: {match.group(0)}: the environment variable "
                                         f"{key} is not set")
            return env[key]
        if provider == "file":
            file = Path(path if path is not None else key).expanduser()
            if not file.is_absolute() and base_dir is not None:
                file = base_dir / file
            label = f"{where}: {match.group(0)}"
            text = _read_text(file, label, _MAX_REFERENCED_FILE)
            if path is None:  # the whole file
                return text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")
            values = {p.key: p.value for p in parse_properties(text, str(file))}
            if key not in values:
                raise ConfigurationError(f"{label}: {file} has no key {key!r}")
            return values[key]
        raise ConfigurationError(f"{where}: {match.group(0)}: unknown config provider "
                                 f"{provider!r} (env and file are known)")

    return _REFERENCE.sub(replace, value)


def load_properties(path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None,
                    resolve: bool = True) -> Properties:
    """A properties file, its ``${...}`` references resolved (unless ``resolve`` is False)."""
    file = Path(path).expanduser()
    # the source expanded: settings with paths take a relative one from its folder
    entries = parse_properties(_read_text(file, "config file", _MAX_PROPERTIES_FILE),
                               str(file))
    if resolve:
        base = file.resolve().parent
        entries = [Property(e.key, resolve_references(e.value, f"{e.where} {e.key}",
                                                      base_dir=base, environ=environ),
                            e.source, e.line, e.raw_value)
                   for e in entries]
    return Properties(entries)


# -- secrets -------------------------------------------------------------------------------

_JAAS_KEY = re.compile(r"(^|\.)sasl\.jaas\.config$")


def is_secret_key(key: str) -> bool:
    """Whether a setting's whole value is a secret (see the module docstring). A
    ``sasl.jaas.config`` is not: only its password options are (:func:`mask_value`)."""
    lowered = key.lower()
    if lowered.endswith(("password", "secret", "token")):
        return True
    last = lowered.rsplit("ssl.", 1)
    if len(last) == 2 and ("password" in last[1] or last[1] == "keystore.key"):
        return True
    return False


def mask_value(key: str, value: str) -> str:
    """``value`` as ``--check-config`` may print it: secrets replaced by ``[hidden]``, a JAAS
    line with its passwords hidden and the rest shown."""
    if is_secret_key(key):
        return MASK if value else ""
    if _JAAS_KEY.search(key.lower()):
        return mask_jaas_config(value)
    return value


def did_you_mean(key: str, known: Collection[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known key, or an empty string."""
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
