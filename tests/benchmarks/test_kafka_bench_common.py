"""What the benchmarks against Kafka share (bench/kafka_bench_common.py): the raw consumer
receives a response whole whatever the server's pieces, woken once per response (a low-water
mark above what is left of a response would never be reached: the client would hang until its
socket timeout), the RSS sampler counts the server's child processes, and the benchmarks print
the host probe measured before and after their rounds."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

kafka_bench_common = pytest.importorskip("bench.kafka_bench_common")

needs_rcvlowat = pytest.mark.skipif(not hasattr(socket, "SO_RCVLOWAT"), reason="no SO_RCVLOWAT here")


def _connected_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname(), timeout=10)
        server, _ = listener.accept()
    return client, server


def _write_in_pieces(sock: socket.socket, data: bytes, pieces: int) -> None:
    step = -(-len(data) // pieces)
    for start in range(0, len(data), step):
        sock.sendall(data[start:start + step])
        time.sleep(0.02)  # each piece arrives on its own


@needs_rcvlowat
@pytest.mark.parametrize("wake_bytes", [0, 64 * 1024, 1 << 20])
def test_a_response_written_in_pieces_arrives_whole(monkeypatch: pytest.MonkeyPatch,
                                                    wake_bytes: int) -> None:
    monkeypatch.setattr(kafka_bench_common, "CLIENT_WAKE_BYTES", wake_bytes)
    data = bytes(range(256)) * (300 * 1024 // 256 + 1)
    client, server = _connected_pair()
    with client, server:
        writer = threading.Thread(target=_write_in_pieces, args=(server, data, 5))
        writer.start()
        got = bytearray(len(data))
        started = time.monotonic()
        kafka_bench_common._recv_frame(client, memoryview(got))
        writer.join()
        assert bytes(got) == data
        assert time.monotonic() - started < 5  # no wait for a mark that is never reached
        # the next size field (4 bytes) must not wait for more than it
        assert client.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1


@needs_rcvlowat
def test_a_server_that_closes_mid_response_is_an_error() -> None:
    client, server = _connected_pair()
    with client:
        server.sendall(b"x" * 1000)
        server.close()
        with pytest.raises(ConnectionError):
            kafka_bench_common._recv_frame(client, memoryview(bytearray(4000)))


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_the_rss_sampler_counts_a_child_started_before_the_read() -> None:
    psutil = pytest.importorskip("psutil")
    child = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                              "block = b'x' * (64 << 20)\n"  # written: resident
                              "sys.stdout.write('up\\n'); sys.stdout.flush(); time.sleep(30)"],
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"up\n"
        me = psutil.Process()
        alone = me.memory_info().rss
        with kafka_bench_common.RssSampler(me) as sampler:
            time.sleep(0.05)
        assert sampler.peak >= alone + (64 << 20)
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_the_host_probe_measures_copies_and_the_interpreter() -> None:
    from bench.bench_common import host_probe

    probe = host_probe()
    # any machine this runs on copies between 0.1 and 1000 GiB/s and loops in 1 ns - 10 us
    assert 0.1 < probe.copy_gib_s < 1000
    assert 1 < probe.python_ns < 10_000
    assert probe.line() == (f"copy {probe.copy_gib_s:.1f} GiB/s, "
                            f"Python loop {probe.python_ns:.0f} ns/iteration")


def test_serve_vs_kafka_prints_the_host_probes_above_its_table() -> None:
    import argparse

    from bench import serve_vs_kafka
    from bench.bench_common import HostProbe

    args = argparse.Namespace(size=128 << 20, fetch_size=1 << 20, rounds=3, consumer_counts=[8])
    versions = {"kafka": "3.9.0", "cpus": "2"}
    summary = {"rows": [], "targets": []}
    probes = {"before": HostProbe(9.5, 25.0), "after": HostProbe(4.0, 41.0)}
    out = serve_vs_kafka.format_tables(summary, versions, args, 131072, probes).splitlines()
    assert out[1] == ("host before / after the rounds: copy 9.5 GiB/s, Python loop 25 ns/iteration"
                      " / copy 4.0 GiB/s, Python loop 41 ns/iteration")
    assert out[3].startswith("| Fetch |")
    assert "host" not in "\n".join(serve_vs_kafka.format_tables(summary, versions, args, 131072))


def test_gateway_vs_kafka_prints_the_host_probes_below_its_heading() -> None:
    from bench import gateway_vs_kafka
    from bench.bench_common import HostProbe

    args = gateway_vs_kafka.parse_args(["--kafka-dist", "k4", "--kafka-dist-3", "k3"])
    run = gateway_vs_kafka.Run(args={}, versions={"kafka_4": "4.0.1", "kafka_3": "3.9.0"},
                               records_per_topic=10)
    assert "host before" not in gateway_vs_kafka.format_tables(
        gateway_vs_kafka.summarize(run, args), run, args)
    run.host_probe = {"before": HostProbe(9.5, 25.0), "after": HostProbe(4.0, 41.0)}
    out = gateway_vs_kafka.format_tables(gateway_vs_kafka.summarize(run, args), run, args)
    assert out.splitlines()[1] == ("host before / after the rounds: copy 9.5 GiB/s, Python loop "
                                   "25 ns/iteration / copy 4.0 GiB/s, Python loop 41 ns/iteration")


def test_gateway_vs_kafka_names_the_old_consumers_fetch_version() -> None:
    """``--old-version 0`` reads as 0.8-0.9 consumers do (magic 0) and its table says so."""
    from bench import gateway_vs_kafka
    from bench.kafka_bench_common import legacy_magic

    assert [legacy_magic(v) for v in range(4)] == [0, 0, 1, 1]
    for argv, heading in (([], "old consumer (Fetch v2 -> magic 1)"),
                          (["--old-version", "0"], "old consumer (Fetch v0 -> magic 0)")):
        args = gateway_vs_kafka.parse_args(["--kafka-dist", "k4", "--kafka-dist-3", "k3", *argv])
        run = gateway_vs_kafka.Run(args={}, versions={"kafka_4": "4.0.1", "kafka_3": "3.9.0"},
                                   records_per_topic=10)
        out = gateway_vs_kafka.format_tables(gateway_vs_kafka.summarize(run, args), run, args)
        assert heading in out
    with pytest.raises(SystemExit):
        gateway_vs_kafka.parse_args(["--kafka-dist", "k4", "--kafka-dist-3", "k3", "--old-version", "4"])


def test_gateway_vs_kafka_pairs_the_metrics_cost_by_round() -> None:
    """A round where the whole machine ran slower moves both reads of that round: the paired
    median divides it out, where the ratio of medians of unpaired reads does not."""
    from bench import gateway_vs_kafka

    args = gateway_vs_kafka.parse_args(["--kafka-dist", "k4", "--kafka-dist-3", "k3",
                                        "--only-gateway", "--metrics-cost", "--codecs", "none",
                                        "--variant", "twin=--chunk-size=128K"])
    run = gateway_vs_kafka.Run(args={}, versions={"kafka_4": "4.0.1", "kafka_3": "-"},
                               records_per_topic=1000)
    slow = {0: 1.0, 1: 1.5, 2: 2.0}  # the machine's speed by round
    cost = {"gw": 1.0, "gw+metrics": 1.02, "gw+twin": 1.0}
    for round_, factor in slow.items():
        for kind in ("old", "old-conc", "v12"):
            for side, c in cost.items():
                # the metered gateway's first read alone got a slow start
                extra = 1.3 if (side == "gw+metrics" and round_ == 0) else 1.0
                run.measures.append({"case": f"{kind}/{side}", "codec": "none", "round": round_,
                                     "records": 1000, "gateway_cpu": factor * c * extra,
                                     "broker_cpu": 0.1, "client_cpu": 0.0, "other_cpu": 0.0,
                                     "seconds": 1.0, "wire_bytes": 0, "mib_s": 100.0})
    row = gateway_vs_kafka.summarize(run, args)["rows"][0]
    assert round(row["metrics_cpu_paired"], 6) == 1.02
    assert round(row["metrics_cpu_paired_conc"], 6) == 1.02
    assert row["variant_gateway_cpu_paired"]["twin"] == (1.0, 1.0, 1.0)  # old, 8 old, v12
    out = gateway_vs_kafka.format_tables(gateway_vs_kafka.summarize(run, args), run, args)
    assert "| on / off | paired |" in out and "| × gateway CPU, paired |" in out
    assert "| none | 1 (v12) | 100.0 | 100.0 | 1.00 |" in out  # the variant's v2 client reads


def test_gateway_vs_kafka_pairs_each_v12_read_with_the_one_beside_it() -> None:
    """--v12-repeat makes several v12 reads a round each way, in turn: each variant read is
    paired with the first gateway's read made beside it, not with that round's last one."""
    from bench import gateway_vs_kafka

    args = gateway_vs_kafka.parse_args(["--kafka-dist", "k4", "--kafka-dist-3", "k3",
                                        "--codecs", "none", "--consumers", "1", "--v12-repeat", "3",
                                        "--variant", "nosplice=--fetch-splice=false"])
    run = gateway_vs_kafka.Run(args={}, versions={"kafka_4": "4.0.1", "kafka_3": "3.9.0"},
                               records_per_topic=1000)
    for round_ in range(3):
        for speed in (1.0, 1.5, 2.0):  # the machine slows down over each round's reads
            for side, cost in (("gw", 1.0), ("gw+nosplice", 1.2)):
                run.measures.append({"case": f"v12/{side}", "codec": "none", "round": round_,
                                     "records": 1000, "gateway_cpu": speed * cost,
                                     "broker_cpu": 0.1, "client_cpu": 0.0, "other_cpu": 0.0,
                                     "seconds": 1.0, "wire_bytes": 0, "mib_s": 100.0})
    row = gateway_vs_kafka.summarize(run, args)["rows"][0]
    assert round(row["variant_gateway_cpu_paired"]["nosplice"][2], 6) == 1.2


@pytest.mark.slow  # about 2.7 s: out of the quick look
def test_the_metrics_scraper_scrapes_reads_shorter_than_its_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The metered gateway is read in timed reads, the scraper started and stopped around each:
    its wait for the next scrape goes on over them (a wait begun afresh at each read scrapes no
    read shorter than the interval), from a random point of the first interval."""
    import http.server
    import random

    from bench import gateway_vs_kafka

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"lazyconv_up 1\n")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        for phase, reads, scrapes in ((1.0, 2, 1), (0.25, 1, 1)):  # of the interval
            monkeypatch.setattr(random, "uniform", lambda low, high, phase=phase: high * phase)
            # the interval and the reads long enough that a thread started late on a loaded
            # machine (CI: four workers, several JVMs, two cores) still scrapes in time: the
            # scrape comes 0.6 s before the read's end (0.2 s, with 0.4 and 0.3, failed in CI)
            scraper = gateway_vs_kafka.Scraper(url, 1.2)
            for _ in range(reads):  # 0.9 s each
                scraper.start()
                time.sleep(0.9)
                scraper.stop()
            assert scraper.scrapes == scrapes
    finally:
        server.shutdown()
        server.server_close()


def test_variants_are_a_name_and_the_gateway_arguments_it_adds() -> None:
    parse = kafka_bench_common.parse_variants
    assert parse(["noahead=--fetch-ahead-bytes=0", "two=--workers=2,--fetch-splice=false", "plain="]) == [
        ("noahead", ["--fetch-ahead-bytes=0"]), ("two", ["--workers=2", "--fetch-splice=false"]),
        ("plain", [])]
    # the name is also part of a topic's name (the produce benchmark's), so only letters,
    # digits, - and _
    for bad in ("noequals", "=--workers=2", "a b=--workers=2", "a+b=--workers=2"):
        with pytest.raises(ValueError, match="is not NAME=ARG"):
            parse([bad])
    with pytest.raises(ValueError, match="given twice"):
        parse(["a=--workers=1", "a=--workers=2"])
