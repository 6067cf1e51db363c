"""SCRAM credentials as Kafka stores them, and the file the gateway keeps them in.

A SCRAM credential (RFC 5802, Kafka's ScramCredential) is what a server needs to check a
password without knowing it: the ``salt``, the ``iterations`` of PBKDF2, the ``stored_key``
(H(HMAC(salted password, "Client Key"))) and the ``server_key`` (HMAC(salted password,
"Server Key")). The password itself is never stored. As in Kafka the password is hashed as its
UTF-8 bytes, without SASLprep (Kafka's ScramFormatter), so a credential made here matches what
Kafka clients prove; iterations are within Kafka's bounds, 4096 to 16384.

**The file** (``gateway.scram.credentials.file``): JSON, one object per user and mechanism::

    {"version": 1, "users": {"alice": {"SCRAM-SHA-512": {"salt": "<base64>",
      "stored_key": "<base64>", "server_key": "<base64>", "iterations": 4096}}}}

written with mode 0600 by an atomic replace (a temporary file in the same folder, fsync,
rename, fsync of the folder), under an exclusive lock so that two writers never lose each
other's change. :func:`scram_credentials_command` is what ``lazyconv gateway
scram-credentials`` runs: ``add`` (the password read from stdin or a file, never from the
command line), ``remove`` and ``list`` (user names, mechanisms and iterations: never keys).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from lazyconv.errors import ConfigurationError

__all__ = [
    "SCRAM_MECHANISMS",
    "MIN_ITERATIONS",
    "MAX_ITERATIONS",
    "DEFAULT_ITERATIONS",
    "ScramCredential",
    "scram_credential",
    "ScramCredentialStore",
    "add_scram_user",
    "remove_scram_user",
    "list_scram_users",
    "scram_credentials_command",
    "read_password",
]

# mechanism -> hashlib name
SCRAM_MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum
MAX_ITERATIONS = 16384  # Kafka's AlterUserScramCredentials maximum
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32
FILE_VERSION = 1
MAX_FILE_BYTES = 64 << 20


@dataclass(frozen=True)
class ScramCredential:
    """One user's credential for one mechanism (keys kept out of repr)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations}, salt={len(self.salt)} bytes)"

    def to_json(self) -> dict[str, Any]:
        return {"salt": _b64(self.salt), "stored_key": _b64(self.stored_key),
                "server_key": _b64(self.server_key), "iterations": self.iterations}

    def kafka_string(self) -> str:
        """Kafka's text form (ScramCredentialUtils): ``salt=...,stored_key=...,server_key=...,iterations=N``."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _check_mechanism(mechanism: str) -> str:
    if mechanism not in SCRAM_MECHANISMS:
        raise ConfigurationError(f"unknown SCRAM mechanism {mechanism!r} (known: "
                                 f"{', '.join(SCRAM_MECHANISMS)})")
    return SCRAM_MECHANISMS[mechanism]


def _check_iterations(iterations: int) -> None:
    if not isinstance(iterations, int) or not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ConfigurationError(f"SCRAM iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS} "
                                 f"(Kafka's bounds), not {iterations!r}")


def scram_credential(mechanism: str, password: str, *, iterations: int = DEFAULT_ITERATIONS,
                     salt: bytes | None = None) -> ScramCredential:
    """The credential a server stores for ``password`` (a fresh random salt unless given)."""
    digest = _check_mechanism(mechanism)
    _check_iterations(iterations)
    if not password:
        raise ConfigurationError("a SCRAM password must not be empty")
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(digest, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


# -- the file ------------------------------------------------------------------------------


class ScramCredentialStore:
    """The credentials of a file, by user and mechanism (read once; :meth:`load` again to see
    changes). ``lookup(mechanism, user)`` is the callback the SCRAM server mechanism uses."""

    def __init__(self, users: Mapping[str, Mapping[str, ScramCredential]] | None = None,
                 path: Path | None = None) -> None:
        self.path = path
        self._users = {user: dict(mechs) for user, mechs in (users or {}).items()}

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, missing_ok: bool = False) -> ScramCredentialStore:
        """Read a credentials file (a :class:`ConfigurationError` names what is wrong);
        ``missing_ok``: a file that does not exist is an empty store."""
        file = Path(path)
        try:
            with open(file, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            if missing_ok:
                return cls({}, file)
            raise ConfigurationError(f"SCRAM credentials file {file} does not exist (create it "
                                     "with 'lazyconv gateway scram-credentials add')") from None
        except OSError as exc:
            raise ConfigurationError(f"SCRAM credentials file {file} cannot be read: "
                                     f"{exc.strerror}") from None
        if len(data) > MAX_FILE_BYTES:
            raise ConfigurationError(f"SCRAM credentials file {file} is larger than 64 MiB")
        return cls(_parse(data, file), file)

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        """The credential of ``user`` for ``mechanism``, or None."""
        return self._users.get(user, {}).get(mechanism)

    def fake_secret(self) -> bytes:
        """The key of the made-up salts an unknown user is shown (:mod:`lazyconv.net._sasl`):
        derived from the stored credentials, so that every process reading this file (after a
        reload, a restart, each gateway behind one name) shows an unknown user the same salt,
        as a known user is always shown hers, and no one without the file can compute it."""
        digest = hashlib.sha256(b"lazyconv SCRAM unknown-user salts\0")
        for user in sorted(self._users):
            for mechanism, credential in sorted(self._users[user].items()):
                for part in (user.encode("utf-8"), mechanism.encode("ascii"), credential.salt,
                             credential.server_key):
                    digest.update(len(part).to_bytes(4, "big") + part)
        return digest.digest()

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """A copy of every user's credentials by mechanism."""
        return {user: dict(mechs) for user, mechs in self._users.items()}

    def with_user(self, user: str, mechanism: str, credential: ScramCredential) -> ScramCredentialStore:
        users = self.users()
        users.setdefault(user, {})[mechanism] = credential
        return ScramCredentialStore(users, self.path)

    def without_user(self, user: str, mechanism: str | None = None) -> ScramCredentialStore:
        users = self.users()
        if mechanism is None:
            users.pop(user, None)
        else:
            users.get(user, {}).pop(mechanism, None)
            if user in users and not users[user]:
                del users[user]
        return ScramCredentialStore(users, self.path)

    def to_json(self) -> str:
        return json.dumps({"version": FILE_VERSION, "users": {
            user: {mech: cred.to_json() for mech, cred in sorted(mechs.items())}
            for user, mechs in sorted(self._users.items())}}, indent=2) + "\n"


def _parse(data: bytes, file: Path) -> dict[str, dict[str, ScramCredential]]:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigurationError(f"SCRAM credentials file {file} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != FILE_VERSION or not isinstance(
            doc.get("users"), dict):
        raise ConfigurationError(f"SCRAM credentials file {file}: expected "
                                 f'{{"version": {FILE_VERSION}, "users": {{...}}}}')
    users: dict[str, dict[str, ScramCredential]] = {}
    for user, mechs in doc["users"].items():
        if not isinstance(mechs, dict):
            raise ConfigurationError(f"SCRAM credentials file {file}: user {user!r} is not an object")
        for mech, raw in mechs.items():
            where = f"SCRAM credentials file {file}: user {user!r} {mech}"
            if mech not in SCRAM_MECHANISMS:
                raise ConfigurationError(f"{where}: unknown mechanism")
            try:
                credential = ScramCredential(
                    base64.b64decode(raw["salt"], validate=True),
                    base64.b64decode(raw["stored_key"], validate=True),
                    base64.b64decode(raw["server_key"], validate=True), raw["iterations"])
            except (KeyError, TypeError, binascii.Error) as exc:
                raise ConfigurationError(f"{where}: not a credential ({type(exc).__name__}: "
                                         f"{exc})") from None
            size = hashlib.new(SCRAM_MECHANISMS[mech]).digest_size
            if len(credential.stored_key) != size or len(credential.server_key) != size:
                raise ConfigurationError(f"{where}: keys of the wrong size for {mech}")
            try:
                _check_iterations(credential.iterations)
            except ConfigurationError as exc:
                raise ConfigurationError(f"{where}: {exc}") from None
            users.setdefault(user, {})[mech] = credential
    return users


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock for a read-modify-write of ``path`` (a ``.lock`` file beside it)."""
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_atomic(path: Path, text: str) -> None:
    folder = path.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        os.fchmod(fd, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _check_user(user: str) -> None:
    if not user or any(ord(c) < 32 for c in user):
        raise ConfigurationError(f"invalid SCRAM user name {user!r} (empty or with control characters)")


def add_scram_user(path: str | os.PathLike[str], user: str, password: str,
                   mechanisms: Sequence[str] = ("SCRAM-SHA-512",), *,
                   iterations: int = DEFAULT_ITERATIONS) -> None:
    """Add ``user`` (or replace its credentials) for each of ``mechanisms``; creates the file."""
    _check_user(user)
    for mechanism in mechanisms:
        _check_mechanism(mechanism)
    _check_iterations(iterations)
    file = Path(path)
    with _locked(file):
        store = ScramCredentialStore.load(file, missing_ok=True)
        for mechanism in mechanisms:
            store = store.with_user(user, mechanism,
                                    scram_credential(mechanism, password, iterations=iterations))
        _write_atomic(file, store.to_json())


def remove_scram_user(path: str | os.PathLike[str], user: str,
                      mechanisms: Sequence[str] | None = None) -> bool:
    """Remove ``user`` (only ``mechanisms`` when given); False when it had none of them."""
    file = Path(path)
    with _locked(file):
        store = ScramCredentialStore.load(file)
        before = store.users().get(user, {})
        if not before or (mechanisms is not None and not set(mechanisms) & set(before)):
            return False
        if mechanisms is None:
            store = store.without_user(user)
        else:
            for mechanism in mechanisms:
                store = store.without_user(user, mechanism)
        _write_atomic(file, store.to_json())
        return True


def list_scram_users(path: str | os.PathLike[str]) -> list[tuple[str, str, int]]:
    """``(user, mechanism, iterations)`` for every credential, sorted."""
    store = ScramCredentialStore.load(path)
    return sorted((user, mech, cred.iterations) for user, mechs in store.users().items()
                  for mech, cred in mechs.items())


def read_password(source: str, *, stdin: TextIO | None = None,
                  environ: Mapping[str, str] | None = None) -> str:
    """A password from ``-`` (one line of stdin: asked without echo when stdin is a terminal),
    ``env:NAME`` or a file path (its first line)."""
    if source == "-":
        reader = stdin if stdin is not None else _stdin()
        if stdin is None and reader.isatty():
            import getpass

            line = getpass.getpass("Password: ")  # typed, never shown
        else:
            line = reader.readline()
    elif source.startswith("env:"):
        env = os.environ if environ is None else environ
        name = source[4:]
        if name not in env:
            raise ConfigurationError(f"the environment variable {name} is not set")
        line = env[name]
    else:
        try:
            line = Path(source).read_text(encoding="utf-8").splitlines()[0] if Path(
                source).stat().st_size else ""
        except OSError as exc:
            raise ConfigurationError(f"password file {source} cannot be read: {exc.strerror}") from None
    password = line.rstrip("\r\n")
    if not password:
        raise ConfigurationError("the password is empty")
    return password


def _stdin() -> TextIO:
    import sys

    return sys.stdin


def scram_credentials_command(action: str, path: str | os.PathLike[str], *, user: str | None = None,
                              mechanisms: Sequence[str] | None = None,
                              iterations: int = DEFAULT_ITERATIONS,
                              password: Callable[[], str] | None = None,
                              out: TextIO | None = None) -> int:
    """What ``lazyconv gateway scram-credentials ACTION FILE`` does; returns the exit status.

    ``add`` needs ``user`` and ``password`` (a callable, e.g. ``lambda: read_password("-")``:
    never a command-line value), for ``mechanisms`` (default SCRAM-SHA-512); ``remove`` needs
    ``user`` (every mechanism unless ``mechanisms`` is given); ``list`` prints ``user mechanism iterations`` lines.
    Raises :class:`ConfigurationError` for a bad request (the CLI prints it as one line)."""
    import sys

    stream = sys.stdout if out is None else out
    if action == "list":
        for name, mech, count in list_scram_users(path):
            print(f"{name}\t{mech}\titerations={count}", file=stream)
        return 0
    if not user:
        raise ConfigurationError(f"scram-credentials {action} needs a user name")
    if action == "add":
        if password is None:
            raise ConfigurationError("scram-credentials add needs a password source")
        chosen = tuple(mechanisms or ("SCRAM-SHA-512",))
        add_scram_user(path, user, password(), chosen, iterations=iterations)
        print(f"added {user} ({', '.join(chosen)}, {iterations} iterations) to {path}",
              file=stream)
        return 0
    if action == "remove":
        if remove_scram_user(path, user, mechanisms or None):
            print(f"removed {user} from {path}", file=stream)
            return 0
        print(f"{user} has no such credentials in {path}", file=stream)
        return 1
    raise ConfigurationError(f"unknown scram-credentials action {action!r} (add, remove, list)")
