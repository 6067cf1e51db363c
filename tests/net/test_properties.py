"""Java .properties as Kafka reads them, ${env:}/${file:} references, secrets masked."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest

from lazyconv.errors import ConfigurationError
from lazyconv.net._properties import (
    Properties,
    did_you_mean,
    is_secret_key,
    load_properties,
    mask_value,
    parse_properties,
)

# Each case checked against java.util.Properties.load (Java 17): key -> value
JAVA_CASES = r"""# a comment
! another comment
   # an indented comment
a=1
b = 2
c:3
d 4
e	=	5
f
g\=h=6
i\:j:7
k\ l=8
m=line one \
    continued \
  and ended
n=tab\there\nnewline\u0041\u00e9
o=back\\slash
p==starts with equals
q=trailing spaces kept \u0020 \

r=\#not a comment
s= x = y : z
"""
EXPECTED = {
    "a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "", "g=h": "6", "i:j": "7",
    "k l": "8", "m": "line one continued and ended", "n": "tab\there\nnewlineAé",
    "o": "back\\slash", "p": "=starts with equals", "q": "trailing spaces kept   ",
    "r": "#not a comment", "s": "x = y : z",
}


def test_java_properties_syntax() -> None:
    entries = parse_properties(JAVA_CASES, "x.properties")
    assert {e.key: e.value for e in entries} == EXPECTED
    lines = {e.key: e.line for e in entries}
    assert lines["a"] == 4 and lines["m"] == 13 and lines["n"] == 16


def test_line_ends_continuation_at_eof_and_last_wins() -> None:
    entries = parse_properties("a=1\r\nb=2\rc=x\\\r\n  y\na=3\nz=end\\", "f")
    assert {e.key: e.value for e in entries} == {"a": "3", "b": "2", "c": "xy", "z": "end"}
    assert Properties(entries).where("a") == "f:5"


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(ConfigurationError, match=r"^f:2: malformed \\uXXXX"):
        parse_properties("ok=1\nbad=\\u12G4\n", "f")


def test_references(tmp_path: Path) -> None:
    (tmp_path / "pw.txt").write_text("file-secret\n")
    (tmp_path / "secrets.properties").write_text("key.password = from-properties\n")
    (tmp_path / "gw.properties").write_text(
        "ssl.key.password=${env:KEY_PW}\n"
        "ssl.keystore.password=${file:pw.txt}\n"
        f"ssl.truststore.password=${{file:{tmp_path}/secrets.properties:key.password}}\n"
        "mixed=pre-${env:KEY_PW}-post\n"
        "plain=no reference\n")
    props = load_properties(tmp_path / "gw.properties", environ={"KEY_PW": "env-secret"})
    assert props["ssl.key.password"] == "env-secret"
    assert props["ssl.keystore.password"] == "file-secret"
    assert props["ssl.truststore.password"] == "from-properties"
    assert props["mixed"] == "pre-env-secret-post"
    assert props.entry("mixed").raw_value == "pre-${env:KEY_PW}-post"
    # a value read through a reference is shown as written, whatever its key
    assert "env-secret" not in repr(props) and "file-secret" not in repr(props)
    assert "mixed=pre-${env:KEY_PW}-post" in props.describe()
    assert "mixed=pre-env-secret-post" in props.describe(masked=False)


@pytest.mark.parametrize(("line", "message"), [
    ("a=${env:NOPE}", r"gw.properties:1 a: \$\{env:NOPE\}: the environment variable NOPE is not set"),
    ("a=${file:missing.txt}", "missing.txt does not exist"),
    ("a=${file:keys.properties:absent}", "has no key 'absent'"),
    ("a=${vault:secret/x:y}", "unknown config provider 'vault'"),
    ("a=${env:a:b}", "takes no path"),
])
def test_bad_references_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "keys.properties").write_text("present=1\n")
    (tmp_path / "gw.properties").write_text(line + "\n")
    with pytest.raises(ConfigurationError, match=message):
        load_properties(tmp_path / "gw.properties", environ={})


def _fifo_fed_with(path: Path, data: bytes) -> threading.Thread:
    """A FIFO at ``path`` that a thread fills with ``data`` (and then closes) once it is opened:
    a file whose size nothing can tell before reading it, as a device or a pipe."""
    os.mkfifo(path)

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), open(path, "wb") as fifo:
            fifo.write(data)

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(("reference", "limit"), [(True, 1 << 20), (False, 16 << 20)])
def test_what_is_read_of_a_file_is_bounded(tmp_path: Path, reference: bool, limit: int) -> None:
    """A ${file:PATH} (or a properties file) that is no regular file, e.g. /dev/zero, was read to
    its end, i.e. forever; at most its bound is read now, and the error names the setting and
    the path, never the content (found by a review)."""
    fifo = tmp_path / "secret.fifo"
    feeder = _fifo_fed_with(fifo, b"s3cret" * (limit // 6 + 2))
    config = tmp_path / "gw.properties"
    config.write_text("ssl.key.password=${file:secret.fifo}\n")
    with pytest.raises(ConfigurationError) as info:
        load_properties(config if reference else fifo)
    feeder.join(10)
    expected = (f"gw.properties:1 ssl.key.password: ${{file:secret.fifo}}: {fifo} is larger than "
                "1 MiB" if reference else f"config file: {fifo} is larger than 16 MiB")
    assert str(info.value).endswith(expected) and "s3cret" not in str(info.value)
    assert "\n" not in str(info.value)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_properties(tmp_path / "nope.properties")
    (tmp_path / "latin1.properties").write_bytes(b"a=1\nb=caf\xe9\n")
    with pytest.raises(ConfigurationError, match=r"latin1.properties:2: not valid UTF-8"):
        load_properties(tmp_path / "latin1.properties")


def test_utf8_values(tmp_path: Path) -> None:
    (tmp_path / "u.properties").write_bytes("password=pässwörd\n".encode())
    assert load_properties(tmp_path / "u.properties")["password"] == "pässwörd"


@pytest.mark.parametrize(("key", "secret"), [
    ("ssl.key.password", True), ("ssl.keystore.password", True),
    ("ssl.truststore.password", True), ("listener.name.sasl_ssl.ssl.key.password", True),
    ("ssl.keystore.key", True), ("gateway.upstream.credentials.alice.password", True),
    ("sasl.oauthbearer.token", True), ("gateway.client.secret", True),
    ("ssl.keystore.location", False), ("ssl.truststore.certificates", False),
    ("sasl.jaas.config", False), ("listeners", False), ("ssl.keystore.certificate.chain", False),
])
def test_secret_keys(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_mask_value_and_describe() -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="alice" password="s3cret";')
    assert "s3cret" not in mask_value("listener.name.x.plain.sasl.jaas.config", jaas)
    assert "alice" in mask_value("sasl.jaas.config", jaas)
    props = Properties.from_mapping({"ssl.key.password": "s3cret", "sasl.jaas.config": jaas,
                                     "listeners": "SSL://:9093"}, "--override")
    lines = props.describe()
    assert "ssl.key.password=[hidden]" in lines and "listeners=SSL://:9093" in lines
    assert not any("s3cret" in line for line in lines)
    assert any("s3cret" in line for line in props.describe(masked=False))


def test_did_you_mean() -> None:
    assert did_you_mean("ssl.keystore.locaton", ["ssl.keystore.location", "listeners"]) == \
        " (did you mean 'ssl.keystore.location'?)"
    assert did_you_mean("zzz", ["listeners"]) == ""


def test_environment_default_is_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAZYCONV_TEST_PW", "x")
    (tmp_path / "p.properties").write_text("a=${env:LAZYCONV_TEST_PW}\n")
    assert load_properties(tmp_path / "p.properties")["a"] == "x"
    assert os.environ["LAZYCONV_TEST_PW"] == "x"
