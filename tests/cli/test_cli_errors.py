"""Every sub-command meets the usual user mistakes with one line on stderr, never a traceback.

The contract (``lazyconv --help``): ``lazyconv CMD: error: MESSAGE``, exit status 2 for a usage
mistake (bad value, missing or unwritable path, busy or out-of-range port, missing extra) and 1
for bad data (records or documents whose content is wrong). Commands run in-process.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lazyconv._cli import main
from lazyconv.records import RecordsBuilder

USAGE, DATA = 2, 1


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One file per kind of input a user may hand a command by mistake (or on purpose)."""
    root = tmp_path_factory.mktemp("inputs")
    builder = RecordsBuilder(magic=2, base_offset=0)
    builder.append(timestamp=1000, key=b"k", value=b"v")
    segment = builder.build()
    paths = {
        "empty.log": b"",
        "random.log": bytes(range(7, 256)) * 3,  # a size field that fits, then magic 0x..: bad
        "text.log": b"this is a text file, not a Kafka log segment\n" * 4,
        "text.txt": b"this is a text file, not a Kafka log segment\n",
        "segment.log": segment,
        "truncated.log": segment + segment[:-3],
        "random.json": bytes(range(128, 256)),
        "empty.json": b"",
        "text.json": b"clients: none\n",
    }
    for name, data in paths.items():
        (root / name).write_bytes(data)
    out = {name: root / name for name in paths}
    out["dir"] = root / "a-folder"
    out["dir"].mkdir()
    out["missing"] = root / "does-not-exist.log"
    return out


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own exits (usage mistakes)
        status = int(exc.code or 0)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_one_error_line(err: str, command: str, fragment: str) -> None:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"lazyconv {command}: error: "), lines[0]
    assert fragment in lines[0], lines[0]


def _cases(f: dict[str, Path], tmp: Path) -> Iterator[tuple[str, list[str], int, str]]:
    """(command, argv, expected status, fragment of the message)."""
    out = str(tmp / "out.bin")
    missing, folder = str(f["missing"]), str(f["dir"])
    for cmd in ("convert", "lazy-send"):
        yield cmd, [cmd, missing, out, "--to-magic", "1"], USAGE, "No such file or directory"
        yield cmd, [cmd, folder, out, "--to-magic", "1"], USAGE, "Is a directory"
        yield cmd, [cmd, str(f["segment.log"]), "/nonexistent/x.bin", "--to-magic", "1"], USAGE, \
            "does not exist"
        yield cmd, [cmd, str(f["segment.log"]), folder, "--to-magic", "1"], USAGE, "Is a directory"
        yield cmd, [cmd, str(f["random.log"]), out, "--to-magic", "1"], DATA, "at byte"
        yield cmd, [cmd, str(f["text.log"]), out, "--to-magic", "0"], DATA, "at byte"
        yield cmd, [cmd, str(f["truncated.log"]), out, "--to-magic", "1", "--strict"], DATA, \
            "trailing bytes"
        yield cmd, [cmd, str(f["segment.log"]), out, "--to-magic", "abc"], USAGE, "--to-magic"
        yield cmd, [cmd, str(f["segment.log"]), out, "--to-magic", "1", "--first-offset", "x"], \
            USAGE, "--first-offset"
    yield "lazy-send", ["lazy-send", str(f["segment.log"]), out, "--to-magic", "1",
                        "--chunk-size", "1"], USAGE, "outside 16K..1M"
    yield "lazy-send", ["lazy-send", str(f["segment.log"]), out, "--to-magic", "1",
                        "--chunk-size", "lots"], USAGE, "not a size"

    yield "dump", ["dump", missing], USAGE, "No such file or directory"
    yield "dump", ["dump", folder], USAGE, "Is a directory"
    yield "dump", ["dump", str(f["text.txt"])], USAGE, "cannot tell what"
    yield "dump", ["dump", str(f["random.log"])], DATA, "at byte"
    yield "dump", ["dump", str(f["text.log"])], DATA, "at byte"
    yield "dump", ["dump", str(f["truncated.log"]), "--strict"], DATA, "trailing bytes"
    yield "dump", ["dump", str(f["segment.log"]), "--max-decompressed-size", "big"], USAGE, \
        "not a size"
    yield "dump", ["dump", str(f["text.log"]), "--type", "snapshot"], DATA, "snapshot"
    # the whole entries are listed and checked against the log first (here the same text file,
    # which does not decode), before the partial last entry is reported
    yield "dump", ["dump", str(f["text.log"]), "--type", "index"], DATA, "at byte"
    segment = str(f["segment.log"])
    yield "dump", ["dump"], USAGE, "required: PATH or --files"
    yield "dump", ["dump", "--files", f"{segment},{missing}"], USAGE, \
        f"argument --files: cannot open {missing}: No such file or directory"
    yield "dump", ["dump", "--files", f"{segment},{folder}"], USAGE, \
        f"argument --files: cannot open {folder}: Is a directory"
    yield "dump", ["dump", "--files", f"{segment},,{segment}"], USAGE, \
        "argument --files: an empty file name"
    yield "dump", ["dump", "--files", ""], USAGE, "argument --files: an empty file name"
    yield "dump", ["dump", segment, "--files", segment], USAGE, "not both"

    yield "assign", ["assign", missing], USAGE, "No such file or directory"
    yield "assign", ["assign", folder], USAGE, "Is a directory"
    yield "assign", ["assign", str(f["random.json"])], DATA, "not a JSON document"
    yield "assign", ["assign", str(f["empty.json"])], DATA, "not valid JSON"
    yield "assign", ["assign", str(f["text.json"])], DATA, "not valid JSON"
    yield "assign", ["assign", str(f["text.json"]), "--indent", "two"], USAGE, "--indent"

    sim = "simulate partitioner"
    yield sim, ["simulate", "partitioner", "--plot", "/nonexistent/x.png", "--records", "10"], \
        USAGE, "does not exist"
    yield sim, ["simulate", "partitioner", "--records", "many"], USAGE, "--records"

    yield "serve", ["serve", missing], USAGE, "No such file or directory"
    yield "serve", ["serve", str(f["segment.log"])], USAGE, "not a directory"
    yield "serve", ["serve", folder, "--port", "99999"], USAGE, "outside 0..65535"
    yield "serve", ["serve", folder, "--port", "http"], USAGE, "not a port number"
    yield "serve", ["serve", folder, "--port", "0", "--chunk-size", "1K"], USAGE, \
        "argument --chunk-size: 1K is outside 16K..1M"
    yield "serve", ["serve", folder, "--port", "0", "--listener", "x:y:z"], USAGE, "--listener"

    yield "validate", ["validate", missing], USAGE, "does not exist"
    yield "validate", ["validate", str(f["segment.log"])], USAGE, "is a file, not a log directory"
    yield "validate", ["validate", folder, "--to-magic", "abc"], USAGE, "--to-magic: 'abc' is not valid"

    yield "fixtures generate", ["fixtures", "generate", str(tmp / "fx"), "--size", "lots"], \
        USAGE, "not a size"
    yield "fixtures generate", ["fixtures", "generate", folder, "--size", "1M",
                                "--partitions", "0"], USAGE, "--partitions"


class _FileNames(dict):  # type: ignore[type-arg]
    """Any key gives a Path of that name: the cases can be listed at collection time."""

    def __missing__(self, key: str) -> Path:
        return Path(key)


# the cases with placeholder paths, for the test ids
_LISTED = list(_cases(_FileNames(), Path("TMP")))


@pytest.mark.parametrize(
    "index", range(len(_LISTED)), ids=[" ".join(argv)[:70] for _, argv, *_ in _LISTED]
)
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_mistake_gives_one_line_and_the_right_status(
    index: int, files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command, argv, expected, fragment = list(_cases(files, tmp_path))[index]
    status, _, err = run(argv, capsys)
    assert status == expected, err
    assert_one_error_line(err, command, fragment)


# (command, its arguments, the option named): a bad value of an option, however it is found
# (by argparse, by what the option configures, against another option), is named as argparse
# names it; none said which option ("chunk size must be between 16384 and 1048576 bytes",
# "max_fetch_version must be in 0..17", "command line (gateway) gateway.workers: ...")
_OPTION_MISTAKES = [
    ("serve", ["--chunk-size", "1K"], "--chunk-size"),
    ("serve", ["--chunk-size", "4M"], "--chunk-size"),
    ("serve", ["--max-fetch-version", "18"], "--max-fetch-version"),
    ("serve", ["--segment-bytes", "10"], "--segment-bytes"),
    ("serve", ["--max-request-size", "4"], "--max-request-size"),
    ("serve", ["--queued-max-request-bytes", "1K"], "--queued-max-request-bytes"),
    ("serve", ["--group-initial-rebalance-delay-ms", "-1"], "--group-initial-rebalance-delay-ms"),
    ("serve", ["--group-min-session-timeout-ms", "0"], "--group-min-session-timeout-ms"),
    ("serve", ["--group-max-session-timeout-ms", "10"], "--group-max-session-timeout-ms"),
    ("serve", ["--listener", "x:y:z"], "--listener"),
    ("serve", ["--listener", "70000"], "--listener"),
    ("serve", ["--topic-config", "t:compression.type=rar"], "--topic-config"),
    ("serve", ["--listener", "9093", "--config", "x.properties"], "--listener"),
    ("gateway", ["--chunk-size", "1K"], "--chunk-size"),
    ("gateway", ["--workers", "0"], "--workers"),
    ("gateway", ["--request-timeout-ms", "0"], "--request-timeout-ms"),
    ("gateway", ["--metadata-max-age-ms", "0"], "--metadata-max-age-ms"),
    ("gateway", ["--upstream-fetch-max-bytes", "1"], "--upstream-fetch-max-bytes"),
    ("gateway", ["--max-request-size", "1"], "--max-request-size"),
    ("gateway", ["--queued-max-request-bytes", "1K"], "--queued-max-request-bytes"),
    ("gateway", ["--client-id-prefix", "p" * 40000], "--client-id-prefix"),
    ("gateway", ["--upstream", "127.0.0.1:9092,nohostport"], "--upstream"),
    ("fixtures generate", ["--partitions", "0"], "--partitions"),
    ("simulate partitioner", ["--rate", "0"], "--rate"),
    ("simulate partitioner", ["--rate", "nan"], "--rate"),
    ("simulate partitioner", ["--records", "0"], "--records"),
    ("simulate partitioner", ["--sender-delay-ms", "-1"], "--sender-delay-ms"),
    ("simulate partitioner", ["--base-latency-ms", "inf"], "--base-latency-ms"),
    ("validate", ["--chunk-sizes", "1K"], "--chunk-sizes"),
    ("validate", ["--to-magic", "5"], "--to-magic"),
    ("validate", ["--fetch-max-bytes", "lots"], "--fetch-max-bytes"),
    ("validate", ["--topic-config", "t"], "--topic-config"),
    ("validate", ["--topic-config", "t:retention.ms=1"], "--topic-config"),
    ("dump", ["--max-bytes", "-1"], "--max-bytes"),
    ("dump", ["--max-bytes", "1.5"], "--max-bytes"),
    ("dump", ["--max-bytes", "lots"], "--max-bytes"),
]


@pytest.mark.parametrize("command,args,option", _OPTION_MISTAKES,
                         ids=[f"{c} {' '.join(a)[:40]}" for c, a, _ in _OPTION_MISTAKES])
def test_a_bad_option_value_is_named_as_argparse_names_it(
    command: str, args: list[str], option: str, files: dict[str, Path],
    capsys: pytest.CaptureFixture[str]
) -> None:
    before = {"serve": ["serve", str(files["dir"]), "--port", "0"],
              "gateway": ["gateway", "--upstream", "127.0.0.1:9092", "--port", "0"],
              "fixtures generate": ["fixtures", "generate", str(files["dir"]), "--size", "1M"],
              "simulate partitioner": ["simulate", "partitioner", "--no-plot"],
              "validate": ["validate", str(files["dir"])],
              "dump": ["dump", str(files["segment.log"])]}[command]
    status, _, err = run([*before, *args], capsys)
    assert status == USAGE, err
    assert_one_error_line(err, command, f"lazyconv {command}: error: argument {option}: ")
    assert err.rstrip().endswith(f" (see 'lazyconv {command} --help')"), err


def test_dump_files_refusals_name_the_option(files: dict[str, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # --files is Kafka's comma-separated list: an entry that is not a readable file, or an empty
    # one between commas (Kafka's tool fails there with a StringIndexOutOfBoundsException), is
    # refused before anything is printed, naming the option and the entry
    segment, missing = files["segment.log"], files["missing"]
    for value, fragment in ((f"{segment},{missing}", f"cannot open {missing}: No such file"),
                            (f"{segment},,{segment}", "an empty file name"),
                            (",", "an empty file name")):
        status, out, err = run(["dump", "--files", value], capsys)
        assert status == USAGE and out == "", err
        assert_one_error_line(err, "dump", f"lazyconv dump: error: argument --files: {fragment}")
        assert err.rstrip().endswith(" (see 'lazyconv dump --help')"), err
    for argv in (["dump"], ["dump", str(segment), "--files", str(segment)]):
        status, out, err = run(argv, capsys)
        assert status == USAGE and out == "", err
        assert_one_error_line(err, "dump", "PATH")
        assert err.rstrip().endswith(" (see 'lazyconv dump --help')"), err


def test_dump_max_bytes_refusals_say_what_is_wrong(files: dict[str, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # Kafka's --max-bytes is a whole number of bytes (its tool: an Integer; a negative one fails
    # there with an IllegalArgumentException from FileRecords.slice)
    for value, message in (("-1", "must be at least 0, got -1"),
                           ("1.5", "expected a whole number, got '1.5'"),
                           ("1K", "expected a whole number, got '1K'"),
                           ("", "expected a whole number, got ''")):
        status, out, err = run(["dump", str(files["segment.log"]), "--max-bytes", value], capsys)
        assert status == USAGE and out == "", err
        assert_one_error_line(err, "dump", f"lazyconv dump: error: argument --max-bytes: {message} "
                                           "(see 'lazyconv dump --help')")


def test_only_an_option_s_error_points_at_help(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # "(see --help)" follows from the option the error names (ConfigurationError.option), not
    # from its text: a path that reads "argument -x" starts a message about no option
    monkeypatch.chdir(tmp_path)
    Path("argument -x", "not-a-partition").mkdir(parents=True)
    status, _, err = run(["validate", "argument -x"], capsys)
    assert status == USAGE
    assert_one_error_line(err, "validate", "argument -x holds no segments")
    assert "--help" not in err, err
    Path("argument -c.properties").write_bytes(b"a=\xff\n")
    status, _, err = run(["gateway", "--config", "argument -c.properties", "--upstream",
                          "127.0.0.1:9092", "--port", "0"], capsys)
    assert status == USAGE
    assert_one_error_line(err, "gateway", "not valid UTF-8")
    assert "--help" not in err, err


def test_an_option_s_error_names_its_option() -> None:
    import pickle

    from lazyconv._commands._common import OptionError
    from lazyconv.errors import ConfigurationError
    from lazyconv.gateway import GatewaySettings

    assert OptionError("--rate", "must be positive").option == "--rate"
    with pytest.raises(ConfigurationError) as caught:
        GatewaySettings.load(overrides={"gateway.workers": "0"},
                             upstream_overrides={"bootstrap.servers": "127.0.0.1:9092"},
                             options={"gateway.workers": "--workers"})
    assert caught.value.option == "--workers"
    assert str(caught.value) == "argument --workers: must be at least 1"
    assert pickle.loads(pickle.dumps(caught.value)).option == "--workers"
    with pytest.raises(ConfigurationError) as caught:  # the same value from no option
        GatewaySettings.load(overrides={"gateway.workers": "0"},
                             upstream_overrides={"bootstrap.servers": "127.0.0.1:9092"})
    assert caught.value.option is None


def test_busy_port(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, _, err = run(["serve", str(files["dir"]), "--port", str(port)], capsys)
    assert status == USAGE
    assert_one_error_line(err, "serve", "port busy")


@pytest.mark.parametrize(
    ("argv", "module", "extra", "command"),
    [
        (["simulate", "partitioner", "--records", "10"], "matplotlib", "plot",
         "simulate partitioner"),
    ],
)
def test_missing_extra_names_the_pip_install(
    argv: list[str], module: str, extra: str, command: str,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, module, None)  # import now fails as if not installed
    status, out, err = run(argv, capsys)
    assert status == USAGE and out == ""
    assert_one_error_line(err, command, f"pip install 'lazyconv[{extra}]'")


def test_validate_without_spark_names_the_spark_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    # validate checks for pyspark itself before starting Spark (the lazyconv.spark modules stay
    # imported: dropping them would leave other tests patching copies nobody uses)
    monkeypatch.setitem(sys.modules, "pyspark", None)
    fixtures = Path(__file__).resolve().parents[2] / "fixtures"  # a log directory with segments
    status, _, err = run(["validate", str(fixtures)], capsys)
    assert status == USAGE
    assert_one_error_line(err, "validate", "pip install 'lazyconv[spark]'")


def test_debug_adds_the_traceback(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(["--debug", "dump", str(files["random.log"])], capsys)
    assert status == DATA
    assert "Traceback" in err
    assert err.strip().splitlines()[-1].startswith("lazyconv dump: error: ")


def test_truncated_tail_is_a_warning_by_default(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("convert", "lazy-send"):
        status, out, err = run(
            [command, str(files["truncated.log"]), str(tmp_path / "o"), "--to-magic", "1",
             *(["--quiet"] if command == "lazy-send" else [])],
            capsys,
        )
        assert status == 0 and out
        whole = files["segment.log"].stat().st_size  # truncated.log = segment + segment[:-3]
        assert err.strip().splitlines() == [
            f"lazyconv {command}: warning: {files['truncated.log']}: {whole - 3} trailing bytes "
            f"do not form a complete batch (at byte {whole}, skipped)"
        ]


def test_empty_segment_is_not_a_mistake(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(["dump", str(files["empty.log"])], capsys)
    assert (status, err) == (0, "")
    status, out, err = run(
        ["convert", str(files["empty.log"]), str(tmp_path / "o"), "--to-magic", "0"], capsys
    )
    assert (status, err) == (0, "")
    assert (tmp_path / "o").read_bytes() == b""


@pytest.mark.slow  # about half a second: kept out of the quick look
def test_python_dash_m_runs_the_cli() -> None:
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "lazyconv", "--version"], capture_output=True, text=True,
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])),
    )
    assert result.returncode == 0
    assert result.stdout.startswith("lazyconv ")


@pytest.mark.parametrize(
    ("text", "size"),
    [("16384", 16384), ("16K", 16384), ("16k", 16384), ("16KiB", 16384), ("16KB", 16384),
     ("1M", 1 << 20), ("1.5G", 3 << 29), ("2B", 2)],
)
def test_one_size_syntax(text: str, size: int) -> None:
    from lazyconv._commands._common import parse_size

    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "1.5", "-1", "16Q", "K", "1 M B"])
def test_size_syntax_refuses(text: str) -> None:
    import argparse

    from lazyconv._commands._common import parse_size

    with pytest.raises(argparse.ArgumentTypeError, match="not a size"):
        parse_size(text)


def test_help_texts_are_clean(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, needle in (
        (["serve", "--help"], "00000000000000000000.log"),
        (["simulate", "partitioner", "--help"], "out/simulate/"),
    ):
        status, out, _ = run(argv, capsys)
        assert status == 0
        assert needle in out
        assert "%%" not in out and "%(" not in out
