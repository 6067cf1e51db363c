"""A minimal Kafka-protocol listener on 127.0.0.1 for driving a real kafka-python producer.

It answers ApiVersions, Metadata (advertising N brokers — all at this one address — leading
the topic's partitions round-robin) and Produce (acks 1), and records which partition every
produced record landed on. kafka-python's own protocol classes encode and decode the messages;
this is test scaffolding, not library code.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest


@dataclass
class ProducedBatch:
    node: int
    topic: str
    partition: int
    values: list[bytes | None]


@dataclass
class MiniKafka:
    topic: str
    partitions: int
    brokers: int
    host: str = "127.0.0.1"
    port: int = 0
    produced: list[ProducedBatch] = field(default_factory=list)
    produce_versions: set[int] = field(default_factory=set)
    errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server = socket.create_server((self.host, 0))
        self.port = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def leader_of(self, partition: int) -> int:
        return partition % self.brokers

    def records_per_partition(self) -> dict[int, int]:
        counts = dict.fromkeys(range(self.partitions), 0)
        with self._lock:
            for batch in self.produced:
                counts[batch.partition] += len(batch.values)
        return counts

    def close(self) -> None:
        self._stop.set()
        self._server.close()
        for conn in self._conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    # -- serving ---------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self._conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    @staticmethod
    def _read_exact(conn: socket.socket, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _serve(self, conn: socket.socket) -> None:
        from kafka.protocol.metadata import (
            ApiVersionsRequest,
            ApiVersionsResponse,
            MetadataRequest,
            MetadataResponse,
        )
        from kafka.protocol.producer import ProduceRequest, ProduceResponse
        from kafka.record import MemoryRecords

        try:
            while True:
                head = self._read_exact(conn, 4)
                if head is None:
                    return
                frame = self._read_exact(conn, struct.unpack(">i", head)[0])
                if frame is None:
                    return
                api_key, version = struct.unpack(">hh", frame[:4])
                if api_key == 18:
                    req = ApiVersionsRequest.decode(frame, version=version, header=True)
                    resp = ApiVersionsResponse(
                        error_code=0,
                        api_keys=[
                            ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3),
                            ApiVersionsResponse.ApiVersion(api_key=3, min_version=0, max_version=9),
                            ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=8),
                        ],
                        throttle_time_ms=0,
                    )
                elif api_key == 3:
                    req = MetadataRequest.decode(frame, version=version, header=True)
                    M = MetadataResponse
                    resp = M(
                        throttle_time_ms=0,
                        brokers=[
                            M.MetadataResponseBroker(node_id=n, host=self.host, port=self.port, rack=None)
                            for n in range(self.brokers)
                        ],
                        cluster_id="lazyconv-test",
                        controller_id=0,
                        topics=[
                            M.MetadataResponseTopic(
                                error_code=0, name=self.topic, is_internal=False,
                                partitions=[
                                    M.MetadataResponseTopic.MetadataResponsePartition(
                                        error_code=0, partition_index=p, leader_id=self.leader_of(p),
                                        leader_epoch=0, replica_nodes=[self.leader_of(p)],
                                        isr_nodes=[self.leader_of(p)], offline_replicas=[],
                                    )
                                    for p in range(self.partitions)
                                ],
                            )
                        ],
                    )
                elif api_key == 0:
                    req = ProduceRequest.decode(frame, version=version, header=True)
                    self.produce_versions.add(version)
                    R = ProduceResponse.TopicProduceResponse
                    topics = []
                    for topic_data in req.topic_data:
                        parts = []
                        for pdata in topic_data.partition_data:
                            values = [r.value for b in [MemoryRecords(bytes(pdata.records))]
                                      for r in _iter_records(b)]
                            with self._lock:
                                self.produced.append(ProducedBatch(
                                    self.leader_of(pdata.index), topic_data.name, pdata.index, values))
                            parts.append(R.PartitionProduceResponse(
                                index=pdata.index, error_code=0, base_offset=0,
                                log_append_time_ms=-1, log_start_offset=0,
                            ))
                        topics.append(R(name=topic_data.name, partition_responses=parts))
                    if req.acks == 0:
                        continue
                    resp = ProduceResponse(responses=topics, throttle_time_ms=0)
                else:
                    raise AssertionError(f"test listener got unexpected api_key {api_key}")
                # Set the version before the header: a response header has no api version.
                resp.API_VERSION = version
                resp.with_header(correlation_id=req.header.correlation_id)
                conn.sendall(resp.encode(header=True, framed=True))
        except OSError:
            return
        except Exception as exc:  # surfaced by the test through .errors
            self.errors.append(exc)
            conn.close()


def _iter_records(records):
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            return
        yield from batch


@pytest.fixture
def mini_kafka_factory() -> Iterator:
    servers: list[MiniKafka] = []

    def make(topic: str = "landing", partitions: int = 3, brokers: int = 3) -> MiniKafka:
        server = MiniKafka(topic, partitions, brokers)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()
