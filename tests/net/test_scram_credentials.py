"""The SCRAM credentials file: Kafka's salted hashes (never passwords), 0600, atomic, locked."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import stat
import threading
from pathlib import Path

import pytest
import scramp

from lazyconv.errors import ConfigurationError
from lazyconv.net._scram_credentials import (
    ScramCredentialStore,
    add_scram_user,
    list_scram_users,
    read_password,
    remove_scram_user,
    scram_credential,
    scram_credentials_command,
)


def test_credential_is_rfc5802_and_matches_scramp() -> None:
    # scramp makes the same keys from the same salt (the password is ASCII: no SASLprep effect)
    salt = b"0123456789abcdef"
    for mechanism, digest in (("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")):
        ours = scram_credential(mechanism, "pencil", iterations=4096, salt=salt)
        theirs = scramp.ScramMechanism(mechanism).make_auth_info("pencil", 4096, salt)
        assert (ours.salt, ours.stored_key, ours.server_key, ours.iterations) == theirs
        salted = hashlib.pbkdf2_hmac(digest, b"pencil", salt, 4096)
        assert ours.server_key == hmac.new(salted, b"Server Key", digest).digest()


def test_no_saslprep_like_kafka() -> None:
    # Kafka's ScramFormatter hashes the UTF-8 bytes as they are; SASLprep would map U+00A0
    # (no-break space) to a space, and Kafka clients would then fail to authenticate
    salt = b"s" * 16
    ours = scram_credential("SCRAM-SHA-256", "a\u00a0b", salt=salt)
    raw = hashlib.pbkdf2_hmac("sha256", "a\u00a0b".encode(), salt, 4096)
    assert ours.stored_key == hashlib.sha256(hmac.new(raw, b"Client Key", "sha256").digest()).digest()


def test_bounds() -> None:
    with pytest.raises(ConfigurationError, match="4096..16384"):
        scram_credential("SCRAM-SHA-256", "x", iterations=4095)
    with pytest.raises(ConfigurationError, match="4096..16384"):
        scram_credential("SCRAM-SHA-256", "x", iterations=16385)
    with pytest.raises(ConfigurationError, match="unknown SCRAM mechanism"):
        scram_credential("SCRAM-SHA-1", "x")
    with pytest.raises(ConfigurationError, match="empty"):
        scram_credential("SCRAM-SHA-256", "")


def test_add_list_remove(tmp_path: Path) -> None:
    path = tmp_path / "scram.json"
    add_scram_user(path, "alice", "alice-secret", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
    add_scram_user(path, "bob", "bob-secret", iterations=8192)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert "alice-secret" not in text and "bob-secret" not in text
    assert list_scram_users(path) == [("alice", "SCRAM-SHA-256", 4096),
                                      ("alice", "SCRAM-SHA-512", 4096),
                                      ("bob", "SCRAM-SHA-512", 8192)]
    store = ScramCredentialStore.load(path)
    cred = store.lookup("SCRAM-SHA-512", "alice")
    assert cred is not None and store.lookup("SCRAM-SHA-256", "bob") is None
    # the stored credential verifies the password (scramp's server over it)
    server = scramp.ScramMechanism("SCRAM-SHA-512").make_server(
        lambda u: (cred.salt, cred.stored_key, cred.server_key, cred.iterations))
    client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", "alice-secret")
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    server.set_client_final(client.get_client_final())
    client.set_server_final(server.get_server_final())
    assert remove_scram_user(path, "alice", ["SCRAM-SHA-256"])
    assert list_scram_users(path)[0] == ("alice", "SCRAM-SHA-512", 4096)
    assert remove_scram_user(path, "alice") and not remove_scram_user(path, "alice")
    assert list_scram_users(path) == [("bob", "SCRAM-SHA-512", 8192)]
    assert not list(tmp_path.glob(".scram.json.*")), "a temporary file was left behind"
    assert repr(cred.stored_key) not in repr(store.users())  # repr hides keys


def test_replacing_a_password_changes_salt_and_keys(tmp_path: Path) -> None:
    path = tmp_path / "scram.json"
    add_scram_user(path, "alice", "one")
    first = ScramCredentialStore.load(path).lookup("SCRAM-SHA-512", "alice")
    add_scram_user(path, "alice", "two")
    second = ScramCredentialStore.load(path).lookup("SCRAM-SHA-512", "alice")
    assert first and second and first.salt != second.salt and first.stored_key != second.stored_key


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "scram.json"
    threads = [threading.Thread(target=add_scram_user, args=(path, f"user{i}", "pw"))
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {u for u, _, _ in list_scram_users(path)} == {f"user{i}" for i in range(4)}


@pytest.mark.parametrize(("content", "message"), [
    ("not json", "not valid JSON"),
    ('{"version": 2, "users": {}}', "expected"),
    ('{"version": 1, "users": {"a": {"SCRAM-SHA-1": {}}}}', "unknown mechanism"),
    ('{"version": 1, "users": {"a": {"SCRAM-SHA-256": {"salt": "!!"}}}}', "not a credential"),
    ('{"version": 1, "users": {"a": {"SCRAM-SHA-256": {"salt": "AA==", "stored_key": "AA==", '
     '"server_key": "AA==", "iterations": 4096}}}}', "wrong size"),
])
def test_bad_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "scram.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=message):
        ScramCredentialStore.load(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        ScramCredentialStore.load(tmp_path / "nope.json")
    assert ScramCredentialStore.load(tmp_path / "nope.json", missing_ok=True).users() == {}


def test_kafka_string_form() -> None:
    cred = scram_credential("SCRAM-SHA-256", "x", salt=b"\x01\x02")
    assert cred.kafka_string().startswith("salt=AQI=,stored_key=")
    assert cred.kafka_string().endswith(",iterations=4096")
    assert base64.b64decode(cred.to_json()["server_key"]) == cred.server_key


def test_command(tmp_path: Path) -> None:
    path = tmp_path / "scram.json"
    out = io.StringIO()
    assert scram_credentials_command("add", path, user="alice", out=out,
                                     password=lambda: read_password("-", stdin=io.StringIO("pw\n"))) == 0
    assert scram_credentials_command("list", path, out=out) == 0
    assert scram_credentials_command("remove", path, user="nobody", out=out) == 1
    assert scram_credentials_command("remove", path, user="alice", out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("added alice (SCRAM-SHA-512, 4096 iterations)")
    assert lines[1] == "alice\tSCRAM-SHA-512\titerations=4096"
    assert "pw" not in out.getvalue().replace("pw\n", "")
    with pytest.raises(ConfigurationError, match="needs a user"):
        scram_credentials_command("add", path, password=lambda: "x")
    with pytest.raises(ConfigurationError, match="unknown scram-credentials action"):
        scram_credentials_command("rename", path, user="a")
    assert json.loads(path.read_text())["users"] == {}


def test_read_password(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("from-file\nignored\n")
    assert read_password(str(tmp_path / "pw")) == "from-file"
    assert read_password("env:PW", environ={"PW": "from-env"}) == "from-env"
    with pytest.raises(ConfigurationError, match="not set"):
        read_password("env:PW", environ={})
    with pytest.raises(ConfigurationError, match="empty"):
        read_password("-", stdin=io.StringIO("\n"))
