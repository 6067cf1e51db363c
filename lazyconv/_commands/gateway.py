"""``lazyconv gateway --upstream HOST:PORT``: old Kafka clients in front of a Kafka 4 cluster;
``--config`` / ``--upstream-config`` for a secured one (TLS and SASL on both sides), and
``lazyconv gateway scram-credentials`` for the SCRAM users of its listeners.

Run as a service (docs/guide/gateway.md, "Running it as a service"): ``--metrics-port`` serves
Prometheus metrics, health and the clients report; SIGTERM (and SIGINT) drain it, a second
one stops it at once; SIGHUP reloads; ``--log-format json`` for log shippers; a systemd
``Type=notify`` unit is told when it listens (``READY=1``: systemd sends no reload before) and
when it drains (``STOPPING=1``).
``lazyconv gateway clients URL`` prints a running gateway's clients report as a table.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from typing import TYPE_CHECKING, Any

from lazyconv._commands._common import (
    UsageError,
    add_connection_limit_options,
    format_size,
    parse_size,
    port_number,
    positive_int,
    send_buffer_type,
    size_type,
)
from lazyconv._commands._sighup import HeldSighup, held_sighup, reloads_on_sighup
from lazyconv.conversion._cache import GATEWAY_CONVERSION_CACHE_BYTES
from lazyconv.conversion._chunks import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE

if TYPE_CHECKING:
    from lazyconv.gateway._settings import GatewaySettings

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "gateway",
        help="let old Kafka clients use a Kafka 4 cluster (old versions downstream, "
             "down- and up-conversion in the middle, consumer groups relayed)",
        description=(
            "Listen for Kafka clients of any protocol version and answer them from the Kafka "
            "cluster at --upstream, using only versions Kafka 4 accepts upstream (Produce >= 3, "
            "Fetch >= 4, ListOffsets >= 1, OffsetCommit >= 2, OffsetFetch >= 1, JoinGroup >= 2). "
            "The gateway answers or converts itself: Produce v0-11 (v12 where the cluster "
            "serves it), Fetch v0-17, ListOffsets v0-8, Metadata v0-13, ApiVersions v0-4, "
            "FindCoordinator v0-6, and the consumer group APIs JoinGroup v0-9, SyncGroup v0-5, "
            "Heartbeat v0-4, LeaveGroup v0-5, OffsetCommit v0-8, OffsetFetch v0-7, DescribeGroups "
            "v0-5, ListGroups v0-5. Consumers of Fetch v0-3 get the records down-converted to "
            "magic 0 or 1 lazily, chunk by chunk; producers of magic 0/1 message sets have them "
            "up-converted to v2 batches. Every other API a Kafka 4 cluster serves (idempotent and "
            "transactional producers, admin APIs, ACLs, configs, the KIP-848 consumer protocol) "
            "is relayed at the versions the cluster serves, to where Kafka routes it: any "
            "broker, the controller, the group or transaction coordinator, each partition's "
            "leader, each broker; WriteTxnMarkers, AlterReplicaLogDirs, UnregisterBroker and "
            "the SASL APIs (which a SASL listener of --config answers itself, before any other "
            "request) are answered UNSUPPORTED_VERSION. The gateway presents itself as "
            "the whole cluster (one broker that leads every partition and coordinates every "
            "group and transaction) and each client's own client id goes upstream. On a secured "
            "cluster: --config (the gateway's listeners, with TLS and SASL, in Kafka's broker "
            "property names) and --upstream-config (a Kafka client properties file); clients "
            "keep their own identity upstream (gateway.identity=passthrough) or the gateway "
            "authenticates them and maps each principal to upstream credentials "
            "(gateway.identity=gateway). Every option is also a setting of one of the two files "
            "(the option wins). Runs until "
            "SIGTERM or SIGINT, which drain it: /health/ready answers 503, the listener closes, "
            "each connection closes once its request is answered (--drain-timeout-ms at most), "
            "exit 0; a second signal stops it at once. SIGHUP reloads (the upstream metadata, "
            "the --log-file, and from the two files the listeners' certificates, SASL users, "
            "SCRAM credentials and the principals' upstream credentials, for new connections) "
            "without closing a connection."
        ),
        epilog="'lazyconv gateway clients URL' prints the clients report of a gateway started "
               "with --metrics-port (URL: http://HOST:PORT of its metrics listener).",
    )
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="the gateway's own settings as Kafka broker properties: listeners="
                             "SASL_SSL://0.0.0.0:9094,..., ssl.keystore.*, ssl.truststore.*, "
                             "ssl.client.auth, sasl.enabled.mechanisms, listener.name.<listener>."
                             "<mechanism>.sasl.jaas.config, ssl.principal.mapping.rules; ours "
                             "under gateway.* (gateway.identity=passthrough|gateway, "
                             "gateway.scram.credentials.file, gateway.upstream.credentials.*); "
                             "secrets as ${env:NAME} or ${file:PATH}, never on the command line "
                             "(docs/guide/gateway.md#secured-clusters)")
    parser.add_argument("--upstream-config", metavar="FILE", default=None,
                        help="how to reach the cluster, as a Kafka client properties file (what "
                             "Kafka's tools take with --command-config): bootstrap.servers, "
                             "security.protocol, ssl.truststore.*, ssl.keystore.*, "
                             "ssl.endpoint.identification.algorithm, sasl.mechanism, "
                             "sasl.jaas.config")
    parser.add_argument("--check-config", action="store_true",
                        help="print the effective settings (secrets masked), check the key and "
                             "trust stores and credentials files, and exit without connecting")
    parser.add_argument("--upstream", default=None, metavar="HOST:PORT[,HOST:PORT...]",
                        help="bootstrap brokers of the Kafka cluster (or bootstrap.servers in "
                             "--upstream-config)")
    parser.add_argument("--host", default=None,
                        help="address to bind (default 127.0.0.1; a PLAINTEXT listener: "
                             "secured ones are listeners= in --config)")
    parser.add_argument("--port", type=port_number, default=None,
                        help="port to listen on (default 9092; 0 picks a free port)")
    parser.add_argument("--advertised-host", default=None,
                        help="host name Metadata advertises, where clients connect (default: "
                             "--host; required when --host is a wildcard such as 0.0.0.0; "
                             "advertised.listeners in --config wins)")
    parser.add_argument("--advertised-port", type=port_number, default=None,
                        help="port Metadata advertises (default: the port listened on); behind "
                             "a TCP load balancer, its host and port")
    parser.add_argument("--chunk-size", type=size_type(MIN_CHUNK_SIZE, MAX_CHUNK_SIZE), default=None,
                        help="input bytes down-converted per step, 16K-1M (default 1M; "
                             "gateway.chunk.size)")
    parser.add_argument("--upstream-fetch-max-bytes", type=parse_size, default=None,
                        help="the most one upstream Fetch response may hold (default 1M; "
                             "fetch.max.bytes): with one converted chunk, what a client "
                             "connection costs in memory")
    parser.add_argument("--fetch-ahead-bytes", type=parse_size, default=None,
                        help="what the ranges fetched ahead for sequential consumers may hold "
                             "over every connection (default 32M; gateway.fetch.ahead.bytes): a "
                             "consumer's next fetch is asked of the broker while its answer is "
                             "written; 0 turns fetch-ahead off")
    parser.add_argument("--fetch-splice", choices=("true", "false"), default=None,
                        help="pass the records of a Fetch v10+ that one upstream leader answers "
                             "from the broker's socket to the client's with splice(2), never "
                             "copied through the gateway (default true; gateway.fetch.splice; "
                             "used where neither side is TLS and the upstream is PLAINTEXT)")
    parser.add_argument("--socket-send-buffer", type=send_buffer_type(zero_is_default=False), default=None,
                        metavar="SIZE",
                        help="SO_SNDBUF of client connections (default 1M, where Kafka's "
                             "socket.send.buffer.bytes is 100K: a converted 1 MiB chunk goes out "
                             "in one write; -1: the OS default)")
    parser.add_argument("--request-timeout-ms", type=int, default=None,
                        help="how long an upstream request may take (default 30000; "
                             "request.timeout.ms)")
    parser.add_argument("--metadata-max-age-ms", type=int, default=None,
                        help="how long the cluster's metadata is trusted (default 30000; "
                             "metadata.max.age.ms)")
    parser.add_argument("--workers", type=int, default=None,
                        help="conversion threads (default: one per core; gateway.workers)")
    parser.add_argument("--convert-on-loop", choices=("quick", "never"), default=None,
                        help="quick (the default): fetches of uncompressed records, and small "
                             "none, snappy and lz4 message sets of old producers, are converted "
                             "on the event loop (cheaper than a trip to a thread), the rest on "
                             "the conversion threads; never: every conversion on the threads "
                             "(gateway.convert.on.loop)")
    parser.add_argument("--conversion-cache", type=parse_size, default=None, metavar="SIZE",
                        help="recent down-conversions of compressed batches kept for consumers "
                             "reading the same records, reused only where the upstream's bytes "
                             "are still identical; 0 turns it off (default "
                             f"{format_size(GATEWAY_CONVERSION_CACHE_BYTES)}; "
                             "gateway.conversion.cache)")
    parser.add_argument("--client-id-prefix", default=None, metavar="PREFIX",
                        help="put before each client's own client id in the requests sent "
                             "upstream (default: none, the client's id as it is; "
                             "gateway.client.id.prefix)")
    add_connection_limit_options(parser, settings_keys=True)
    parser.add_argument("--metrics-port", type=port_number, default=None,
                        help="serve /metrics (Prometheus), /health/live, /health/ready and "
                             "/clients over HTTP on this port (default: off; 0 picks a free one; "
                             "gateway.metrics.listener)")
    parser.add_argument("--metrics-host", default=None,
                        help="address of the metrics listener (default: the host of "
                             "gateway.metrics.listener in --config, else 127.0.0.1; either "
                             "option alone replaces only its part of that setting)")
    parser.add_argument("--max-clients", type=positive_int, default=None,
                        help="clients the clients report keeps, least recently seen forgotten "
                             "first (default 10000; gateway.clients.max)")
    parser.add_argument("--drain-timeout-ms", type=positive_int, default=None,
                        help="on SIGTERM, how long requests in flight may take before their "
                             "connections are cut (default 20000; gateway.drain.timeout.ms)")
    parser.add_argument("--log-format", choices=("text", "json"), default=None,
                        help="log lines as text with a timestamp (default) or one JSON object "
                             "per line; lines about a connection name it (connection id, client "
                             "id, principal, listener) (gateway.log.format)")
    parser.add_argument("--log-file", default=None, metavar="PATH",
                        help="log to this file instead of stderr (reopened on SIGHUP, for "
                             "logrotate; gateway.log.file)")
    parser.set_defaults(handler=run)
    actions = parser.add_subparsers(dest="gateway_action", metavar="{clients,scram-credentials}")
    clients = actions.add_parser(
        "clients", help="print a running gateway's clients report as a table",
        description="Print the clients report of a running gateway (its /clients, JSON) as a "
                    "table: each client's id, software or the Kafka release its versions imply, "
                    "source host, connections, bytes and records each way, last seen, and the "
                    "API versions it used; '!' marks a version Kafka 4 refuses.")
    clients.add_argument("url", metavar="URL",
                         help="the gateway's metrics listener, e.g. http://127.0.0.1:9404")
    clients.add_argument("--json", action="store_true", help="print the report as JSON")
    clients.add_argument("--needs-gateway", action="store_true",
                         help="only the clients that use a version Kafka 4 refuses")
    clients.set_defaults(handler=run_clients)
    scram = actions.add_parser(
        "scram-credentials", help="add, remove or list the SCRAM users of the gateway's "
        "listeners (gateway.scram.credentials.file: salted hashes, never passwords)",
        description="Keep the SCRAM credentials file of gateway.scram.credentials.file (or "
                    "serve.scram.credentials.file): salted PBKDF2 hashes as Kafka stores them "
                    "(RFC 5802), written atomically with mode 0600. The password is read from "
                    "stdin, a file or an environment variable, never from the command line.")
    scram.add_argument("action", choices=("add", "remove", "list"))
    scram.add_argument("file", metavar="FILE", help="the credentials file (created by add)")
    scram.add_argument("--user", default=None, help="the user name (add, remove)")
    scram.add_argument("--mechanism", action="append", default=None,
                       choices=("SCRAM-SHA-256", "SCRAM-SHA-512"),
                       help="the mechanism(s) (default SCRAM-SHA-512 for add; every one for "
                            "remove). Repeatable")
    scram.add_argument("--iterations", type=int, default=4096,
                       help="PBKDF2 iterations, 4096-16384 (default 4096, as Kafka's tools)")
    scram.add_argument("--password-from", default="-", metavar="SOURCE",
                       help="where add reads the password: - (one line of stdin, the default), "
                            "env:NAME, or a file's first line")
    scram.set_defaults(handler=run_scram_credentials)


def run_scram_credentials(args: argparse.Namespace) -> int:
    from lazyconv.net._scram_credentials import read_password, scram_credentials_command

    return scram_credentials_command(args.action, args.file, user=args.user,
                                     mechanisms=args.mechanism, iterations=args.iterations,
                                     password=lambda: read_password(args.password_from))


def _overrides(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The command line's values as the settings' keys (gateway side, upstream side) and the
    option that gave each key; the host and port options are GatewaySettings.load's own
    arguments (merged with the file there)."""
    gateway: dict[str, str] = {}
    upstream: dict[str, str] = {}
    options: dict[str, str] = {}
    for option, key in (("chunk_size", "gateway.chunk.size"), ("workers", "gateway.workers"),
                        ("conversion_cache", "gateway.conversion.cache"),
                        ("max_request_size", "socket.request.max.bytes"),
                        ("queued_max_request_bytes", "queued.max.request.bytes"),
                        ("socket_send_buffer", "socket.send.buffer.bytes"),
                        ("connections_max_idle_ms", "connections.max.idle.ms"),
                        ("request_read_timeout_ms", "gateway.request.read.timeout.ms"),
                        ("write_timeout_ms", "gateway.write.timeout.ms"),
                        ("max_clients", "gateway.clients.max"),
                        ("drain_timeout_ms", "gateway.drain.timeout.ms"),
                        ("log_format", "gateway.log.format"), ("log_file", "gateway.log.file"),
                        ("client_id_prefix", "gateway.client.id.prefix"),
                        ("fetch_ahead_bytes", "gateway.fetch.ahead.bytes"),
                        ("fetch_splice", "gateway.fetch.splice"),
                        ("convert_on_loop", "gateway.convert.on.loop")):
        if getattr(args, option) is not None:
            gateway[key] = str(getattr(args, option))
            options[key] = "--" + option.replace("_", "-")
    for option, key in (("upstream", "bootstrap.servers"),
                        ("upstream_fetch_max_bytes", "fetch.max.bytes"),
                        ("request_timeout_ms", "request.timeout.ms"),
                        ("metadata_max_age_ms", "metadata.max.age.ms")):
        if getattr(args, option) is not None:
            upstream[key] = str(getattr(args, option))
            options[key] = "--" + option.replace("_", "-")
    return gateway, upstream, options


def load_settings(args: argparse.Namespace) -> GatewaySettings:
    """The settings the command line and the two files give (see GatewaySettings.load)."""
    from lazyconv.gateway import GatewaySettings

    gateway, upstream, options = _overrides(args)
    return GatewaySettings.load(args.config, args.upstream_config, overrides=gateway,
                                upstream_overrides=upstream, host=args.host, port=args.port,
                                metrics_host=args.metrics_host, metrics_port=args.metrics_port,
                                options=options, advertised_host=args.advertised_host)


@reloads_on_sighup
def run(args: argparse.Namespace) -> int:
    # a SIGHUP from the CLI's first statement on is counted (lazyconv._commands._sighup), and
    # the reload done once the gateway has started, instead of the signal ending the process
    with held_sighup() as held:
        try:
            return _run(args, held)
        finally:
            if held.take():  # it never ran: its settings are read again at its next start
                log.info("a SIGHUP came before the gateway ran: nothing to reload")


def _run(args: argparse.Namespace, held: HeldSighup) -> int:
    import asyncio

    from lazyconv._commands._log_format import ReopenableFileHandler, use_log_format
    from lazyconv.conversion._cache import conversion_cache
    from lazyconv.gateway import Gateway
    from lazyconv.net._limits import tune_allocator

    settings = load_settings(args)
    if args.check_config:
        from lazyconv.gateway._settings import check_materials

        check_materials(settings)
        print(settings.describe(masked=True), end="")
        return 0
    handler = use_log_format("gateway", settings.log_format, args.verbose > 0,
                             str(settings.log_file) if settings.log_file is not None else None)
    # a service's log: state changes, new clients, draining (-v: the same; -vv: debug)
    logging.getLogger().setLevel(logging.DEBUG if args.verbose >= 2 else logging.INFO)
    gateway = Gateway(settings=settings, advertised_host=args.advertised_host,
                      advertised_port=args.advertised_port, chunk_size=settings.chunk_size,
                      workers=settings.workers)
    if isinstance(handler, ReopenableFileHandler):
        gateway.on_reload(handler.reopen)
    if args.config is not None or args.upstream_config is not None:
        # the files read again: renewed certificates, SASL users, upstream credentials
        gateway.on_reload(lambda: gateway.apply_settings(load_settings(args)))
    tune_allocator()  # chunk-sized buffers stay in the heap, as for serve
    conversion_cache.resize(settings.conversion_cache_bytes)
    bootstrap = ",".join(settings.upstream.bootstrap_servers)
    stopped_by: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        main_task = asyncio.current_task()
        assert main_task is not None

        def on_stop(sig: signal.Signals) -> None:
            stopped_by.append(sig.name)
            if len(stopped_by) == 1:
                notify_service_manager("STOPPING=1")
                stop.set()  # drain
            else:
                main_task.cancel()  # a second signal: at once

        await gateway.start()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_stop, sig)
        loop.add_signal_handler(signal.SIGHUP, gateway.reload)
        if held.take():  # sent while the gateway started: done now
            log.info("a SIGHUP came while the gateway started: reloading now")
            gateway.reload()
        metrics = (f", metrics on http://{gateway.metrics_host}:{gateway.metrics_port}"
                   if gateway.metrics_port is not None else "")
        for index, listener in enumerate(gateway.listeners):
            # One line per listener on stdout, so scripts can wait for it and read the port.
            host, port = gateway.server.bound_address(index)
            over = "" if listener.security_protocol == "PLAINTEXT" else \
                f" ({listener.security_protocol})"
            advertised = (f", advertised as {listener.host}:{listener.port}"
                          if (listener.host, listener.port) != (host, port) else "")
            print(f"gateway to {bootstrap} on {host}:{port}{over} as node {listener.node_id}"
                  f"{advertised}{metrics if index == 0 else ''}", flush=True)
        # a Type=notify unit is started now: systemd runs no ExecReload before
        notify_service_manager("READY=1")
        serving = loop.create_task(gateway.serve_forever())
        try:
            await stop.wait()
            await gateway.drain()
        finally:
            serving.cancel()
            await gateway.close()

    try:
        asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    print(f"gateway stopped ({stopped_by[0] if stopped_by else 'interrupted'})", file=sys.stderr)
    return 0


def notify_service_manager(state: str) -> bool:
    """Tell the service manager the gateway's ``state`` (``READY=1``, ``STOPPING=1``), where one
    asks for it: systemd's ``Type=notify`` units, by a datagram to ``$NOTIFY_SOCKET`` (a path,
    or ``@name`` in Linux's abstract namespace). False when none asks, or the datagram could
    not be sent (said in a warning: the gateway serves all the same)."""
    import os
    import socket

    address = os.environ.get("NOTIFY_SOCKET")
    if not address or not hasattr(socket, "AF_UNIX"):
        return False
    target = "\0" + address[1:] if address.startswith("@") else address
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(target)
            sock.sendall(state.encode("ascii"))
    except OSError as exc:
        log.warning("cannot tell the service manager %s at NOTIFY_SOCKET=%s: %s", state,
                    address, exc.strerror or exc)
        return False
    return True


def run_clients(args: argparse.Namespace) -> int:
    """``lazyconv gateway clients URL``: the report of the gateway at URL, as a table."""
    report = fetch_clients_report(args.url)
    clients = report["clients"]
    if args.needs_gateway:
        clients = [c for c in clients if c["needs_gateway"]]
    if args.json:
        print(json.dumps({**report, "clients": clients}, indent=1))
        return 0
    print(format_clients_table(clients))
    print(f"{len(clients)} client(s), {report['clients_needing_gateway']} using versions Kafka 4 "
          f"refuses ('!'); {report['forgotten']} forgotten (--max-clients {report['max_clients']})")
    return 0


def fetch_clients_report(url: str, timeout: float = 10.0) -> dict[str, Any]:
    """The JSON of URL/clients (URL: the gateway's metrics listener)."""
    import http.client
    import urllib.error
    import urllib.request

    if not url.startswith(("http://", "https://")):
        url = f"http://{url}"
    target = url.rstrip("/")
    if not target.endswith("/clients"):
        target += "/clients"
    shown = _without_credentials(target)  # what error messages name: never a password
    try:
        with urllib.request.urlopen(target, timeout=timeout) as answer:  # noqa: S310 - http(s) only
            data: dict[str, Any] = json.load(answer)
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        # HTTPException: something answered that is not HTTP (BadStatusLine, IncompleteRead),
        # whose text is the peer's bytes, line ends included: not shown
        reason = (f"not an HTTP answer ({type(exc).__name__})"
                  if isinstance(exc, http.client.HTTPException) else getattr(exc, "reason", exc))
        raise UsageError(f"cannot read {shown}: {reason} (is the gateway running with "
                         "--metrics-port?)") from None
    except ValueError as exc:
        raise UsageError(f"{shown} did not answer a clients report: {exc}") from None
    if not (isinstance(data, dict) and isinstance(data.get("clients"), list)
            and all(isinstance(c, dict) and _CLIENT_FIELDS <= c.keys() for c in data["clients"])
            and _REPORT_FIELDS <= data.keys()):
        raise UsageError(f"{shown} did not answer a clients report (is it a lazyconv gateway's "
                         "metrics listener?)")
    return data


# what the table and its summary read of a report
_REPORT_FIELDS = frozenset({"clients", "clients_needing_gateway", "forgotten", "max_clients"})
_CLIENT_FIELDS = frozenset({"client_id", "host", "principal", "connections_open", "connections",
                            "bytes_in", "bytes_out", "records_in", "records_out", "last_seen",
                            "requests"})


def _without_credentials(url: str) -> str:
    """``url`` with a ``user:password@`` part masked."""
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc="[hidden]@" + parts.netloc.rsplit("@", 1)[1]))


def _software(client: dict[str, Any]) -> str:
    if client.get("software_name"):
        return f"{client['software_name']} {client.get('software_version') or ''}".strip()
    release = client.get("implied_release")
    return f"(Kafka {release} protocol)" if release else "?"


def _versions(client: dict[str, Any]) -> str:
    by_api: dict[str, list[str]] = {}
    for request in client["requests"]:
        mark = "!" if request["kafka_4_refuses"] else ""
        by_api.setdefault(request["api"], []).append(f"v{request['version']}{mark}")
    return " ".join(f"{api} {','.join(versions)}" for api, versions in by_api.items())


def format_clients_table(clients: list[dict[str, Any]]) -> str:
    """The clients report's clients as a text table (one row per client)."""
    header = ("CLIENT ID", "SOFTWARE", "HOST", "PRINCIPAL", "CONN", "BYTES IN", "BYTES OUT",
              "RECORDS IN", "RECORDS OUT", "LAST SEEN", "API VERSIONS")
    rows = [header]
    for c in clients:
        rows.append((c["client_id"] or "-", _software(c), c["host"], c["principal"],
                     f"{c['connections_open']}/{c['connections']}", str(c["bytes_in"]),
                     str(c["bytes_out"]), str(c["records_in"]), str(c["records_out"]),
                     c["last_seen"][:19].replace("T", " "), _versions(c)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)
