"""SO_SNDBUF of client connections (``send_buffer_bytes``, Kafka's socket.send.buffer.bytes): set
as configured, bounded to what the socket option takes, and when the OS gives less than asked
(Linux caps it at net.core.wmem_max) the server says so once."""

from __future__ import annotations

import logging
import socket

import pytest

from lazyconv.errors import ConfigurationError
from lazyconv.net._server import MAX_SEND_BUFFER, KafkaServer, ListenerSpec


def _server(send_buffer_bytes: int) -> KafkaServer:
    return KafkaServer(lambda listeners: None, [ListenerSpec("127.0.0.1", 0)],  # type: ignore[arg-type, return-value]
                       send_buffer_bytes=send_buffer_bytes)


def test_a_client_socket_gets_the_size_asked() -> None:
    server = _server(65536)
    with socket.socket() as sock:
        server._set_send_buffer(sock)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) >= 65536


def test_a_size_the_os_caps_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    with open("/proc/sys/net/core/wmem_max") as f:  # noqa: PTH123 - Linux only, as the cap
        cap = int(f.read())
    server = _server(min(cap * 4, MAX_SEND_BUFFER))
    with caplog.at_level(logging.INFO, logger="lazyconv.net._server"):
        for _ in range(3):
            with socket.socket() as sock:
                server._set_send_buffer(sock)
    lines = [r.getMessage() for r in caplog.records if "send buffer" in r.getMessage()]
    assert len(lines) == 1 and "net.core.wmem_max" in lines[0], lines


def test_more_than_the_socket_option_takes_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="more than the socket option takes"):
        _server(MAX_SEND_BUFFER + 1)


@pytest.mark.parametrize("argument, expected", [("-1", -1), ("0", 0), ("100K", 102400)])
def test_serve_takes_kafkas_minus_one_and_its_own_zero(argument: str, expected: int,
                                                       tmp_path) -> None:
    from lazyconv._cli import build_parser

    args = build_parser().parse_args(["serve", str(tmp_path), f"--socket-send-buffer={argument}"])
    assert args.socket_send_buffer == expected
