"""kcat driver: runs the ``kcat`` program and reports its output as :mod:`common` events.

``client``: {"kcat": path, "config": {extra -X settings}}. kcat has no API for pausing or
committing chosen offsets, so its jobs are approximations: "assign" runs one simple consumer
(``-C``) per partition; "subscribe" runs a balanced consumer (``-G``) until ``count`` records
(``-c``) or else the end of its partitions (``-e``), committing what it consumed when it exits
(reporting each rebalance's assignment as it happens);
"produce" pipes the records to ``-P`` (one kcat per partition, keys and headers supported).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from tests.interop.drivers.common import Progress, emit, emit_record, load_job, unb64

ASSIGNED = re.compile(r"rebalanced .*: assigned: (?P<parts>.*)$")
PART = re.compile(r"(?P<topic>[^\s,]+) \[(?P<p>\d+)\]")


def base(job: dict) -> list[str]:
    argv = [job["client"]["kcat"], "-b", job["bootstrap"],
            "-X", "fetch.message.max.bytes=8388608", "-X", "receive.message.max.bytes=104857600"]
    for key, value in job["client"].get("config", {}).items():
        argv += ["-X", f"{key}={value}"]
    return argv


def text_bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def report(line: bytes, progress: Progress) -> None:
    m = json.loads(line)
    if not progress.wanted(m["topic"], m["partition"], m["offset"]):
        return
    flat = m.get("headers") or []
    headers = [(flat[i], text_bytes(flat[i + 1])) for i in range(0, len(flat), 2)]
    emit_record(m["topic"], m["partition"], m["offset"],
                None if m.get("tstype", "none") == "none" else m.get("ts"),
                text_bytes(m["key"]), text_bytes(m["payload"]), headers)


def consume_partition(job: dict, topic: str, partition: int) -> tuple[list[bytes], str, int]:
    argv = [*base(job), "-X", f"isolation.level={job['isolation']}", "-C", "-J", "-e", "-q",
            "-o", "beginning", "-t", topic, "-p", str(partition)]
    done = subprocess.run(argv, capture_output=True, timeout=job["timeout"])
    return done.stdout.splitlines(), done.stderr.decode(errors="replace"), done.returncode


def consume_assign(job: dict) -> None:
    progress = Progress(job["last"])
    emit("assigned", partitions=sorted(job["partitions"]))
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda tp: consume_partition(job, *tp), job["partitions"]))
    for (topic, partition), (lines, stderr, rc) in zip(job["partitions"], results, strict=True):
        if rc != 0:
            emit("error", message=f"kcat on {topic} [{partition}] exited {rc}: {stderr[-800:]}")
            return
        for line in lines:
            report(line, progress)
    emit("done")


def consume_subscribe(job: dict) -> None:
    progress = Progress(job["last"])
    argv = [*base(job), "-X", f"isolation.level={job['isolation']}",
            "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=500",
            "-X", "auto.offset.reset=earliest", "-G", job["group"], "-J"]
    argv += ["-c", str(job["count"])] if job.get("count") else ["-e"]
    proc = subprocess.Popen([*argv, *job["topics"]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    stderr: list[str] = []

    def watch_stderr() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            stderr.append(line)
            m = ASSIGNED.search(line)
            if m:  # kcat prints each rebalance: "... rebalanced (memberid ...): assigned: t [0], ..."
                emit("assigned", partitions=sorted([t, int(p)] for t, p in PART.findall(m.group("parts"))))

    watcher = threading.Thread(target=watch_stderr, daemon=True)
    watcher.start()
    timer = threading.Timer(job["timeout"], proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            report(line, progress)
        proc.wait()
    finally:
        timer.cancel()
    watcher.join(5)
    if proc.returncode != 0:
        emit("error", message=f"kcat -G exited {proc.returncode}: {' / '.join(stderr[-8:])}")
        return
    emit("done")


def present(text: str | None) -> bytes:
    """Bytes kcat -P can send: it has no way to produce a null key or header value."""
    data = unb64(text)
    if data is None:
        raise ValueError("kcat -P cannot send null keys or header values")
    return data


def produce(job: dict) -> None:
    by_partition: dict[int, list[dict]] = {}
    for r in job["records"]:
        by_partition.setdefault(r["partition"], []).append(r)
    for partition, records in sorted(by_partition.items()):
        # kcat -P takes one record a line (-D) with the key before a delimiter (-K); headers are
        # per run (-H), so every record of one run carries the same ones.
        headers = records[0]["headers"]
        assert all(r["headers"] == headers for r in records), "kcat: one header set per run"
        argv = [*base(job), "-P", "-t", job["topic"], "-p", str(partition), "-K", "\t",
                "-D", "\n", "-X", "acks=all", "-X", "linger.ms=5"]
        for k, v in headers:
            argv += ["-H", f"{k}={present(v).decode()}"]
        payload = b"".join(present(r["key"]) + b"\t" + present(r["value"]) + b"\n"
                           for r in records)
        done = subprocess.run(argv, input=payload, capture_output=True, timeout=job["timeout"])
        if done.returncode != 0:
            emit("error", message=f"kcat -P exited {done.returncode}: {done.stderr[-800:]!r}")
            return
    emit("done")


def main() -> None:
    job = load_job()
    try:
        if job["action"] == "produce":
            produce(job)
        elif job["mode"] == "assign":
            consume_assign(job)
        else:
            consume_subscribe(job)
    except Exception as exc:
        emit("error", message=f"{type(exc).__name__}: {exc}")
        raise
    sys.stdout.flush()


if __name__ == "__main__":
    main()
