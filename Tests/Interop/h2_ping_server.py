#!/usr/bin/env python3
"""A stand-in for APNs' device endpoint that keeps PINGing its clients, built
on the PyPI package `h2` over Python's `ssl` and `socket`. It shares no code
with Herald: Herald's tests point its HTTP/2 transport at it and check that
the client answers PINGs promptly while its own code is busy (an outcome
observer that blocks must not block the event loop the connection lives on).

    h2_ping_server.py --cert server.pem --key server-key.pem
        [--host 127.0.0.1] [--port 0] [--ping-interval 0.05]
        [--max-seconds 600] [--ignore-stdin]

TLS with ALPN h2, HTTP/2 on every connection, one thread each. Every
`POST /3/device/<hex token>` is answered `200` with the request's
`apns-id` (a fresh UUID when it had none); any other request `404
BadPath`. Every --ping-interval seconds, while no PING of its own is
unanswered, it sends a PING with 8 fresh bytes and times the ACK.

Start-up: one line `{"port": P, "host": "127.0.0.1"}` on stdout once it
listens. It stops on stdin EOF (--ignore-stdin when running it by hand),
SIGTERM, SIGINT, or after --max-seconds, then prints one line:

    {"requests": n, "answered": n, "connections": n, "pings": n, "acks": n,
     "max_ack_ms": x, "unanswered_ping_ms": x, "wrong_acks": n, "out_of_order": n,
     "stopped_by": "stdin"}

`max_ack_ms` is the longest a PING waited for its ACK; `unanswered_ping_ms`
the age of a PING still unanswered at the end (0 if none). `out_of_order`
counts requests whose stream ended (the body's last DATA frame) after a
request on a higher-numbered stream of the same connection had ended: a
client that writes its streams in order sends them complete in order, and
a server answering as bodies complete (APNs) then closes them in order.
Loopback only.
"""

import argparse
import ipaddress
import json
import os
import secrets
import select
import signal
import socket
import ssl
import sys
import threading
import time
import uuid

import h2.config
import h2.connection
import h2.events
import h2.exceptions

PROG = "h2_ping_server.py"


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {"requests": 0, "answered": 0, "connections": 0, "pings": 0, "acks": 0, "wrong_acks": 0, "out_of_order": 0}
        self.max_ack = 0.0
        self.unanswered = 0.0


class Connection(threading.Thread):
    def __init__(self, raw, context, state, stopping, interval):
        super().__init__(daemon=True)
        self.raw, self.context, self.state, self.stopping, self.interval = raw, context, state, stopping, interval
        self.sock = None
        self.outstanding = None  # (opaque bytes, time sent)

    def shut(self):
        for s in (self.sock, self.raw):
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def run(self):
        try:
            self.raw.settimeout(10)
            try:
                self.sock = self.context.wrap_socket(self.raw, server_side=True)
            except (OSError, ssl.SSLError):
                return
            if self.sock.selected_alpn_protocol() != "h2":
                return
            with self.state.lock:
                self.state.counts["connections"] += 1
            self.sock.settimeout(0.01)
            self.serve()
        except (OSError, h2.exceptions.ProtocolError):
            pass
        finally:
            if self.outstanding is not None:
                with self.state.lock:
                    self.state.unanswered = max(self.state.unanswered, time.monotonic() - self.outstanding[1])
            for s in (self.sock, self.raw):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass

    def serve(self):
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        self.sock.sendall(conn.data_to_send())
        requests = {}
        self.last_ended = 0
        last_ping = time.monotonic()
        while not self.stopping.is_set():
            now = time.monotonic()
            if self.outstanding is None and now - last_ping >= self.interval:
                opaque = secrets.token_bytes(8)
                conn.ping(opaque)
                self.outstanding = (opaque, now)
                last_ping = now
                with self.state.lock:
                    self.state.counts["pings"] += 1
            out = conn.data_to_send()
            if out:
                self.sock.sendall(out)
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, ssl.SSLWantReadError):
                continue
            except (ssl.SSLError, OSError):
                return
            if not data:
                return
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    requests[event.stream_id] = dict(event.headers)
                    with self.state.lock:
                        self.state.counts["requests"] += 1
                    if event.stream_ended is not None:
                        self.respond(conn, event.stream_id, requests.pop(event.stream_id))
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    if event.stream_ended is not None and event.stream_id in requests:
                        self.respond(conn, event.stream_id, requests.pop(event.stream_id))
                elif isinstance(event, h2.events.StreamEnded):
                    if event.stream_id in requests:
                        self.respond(conn, event.stream_id, requests.pop(event.stream_id))
                elif isinstance(event, h2.events.StreamReset):
                    requests.pop(event.stream_id, None)
                elif isinstance(event, h2.events.PingAckReceived):
                    with self.state.lock:
                        if self.outstanding is not None and event.ping_data == self.outstanding[0]:
                            self.state.counts["acks"] += 1
                            self.state.max_ack = max(self.state.max_ack, time.monotonic() - self.outstanding[1])
                            self.outstanding = None
                        else:
                            self.state.counts["wrong_acks"] += 1
                elif isinstance(event, h2.events.ConnectionTerminated):
                    return
        try:
            conn.close_connection()
            self.sock.sendall(conn.data_to_send())
        except (OSError, h2.exceptions.ProtocolError):
            pass

    def respond(self, conn, sid, headers):
        if sid < self.last_ended:
            with self.state.lock:
                self.state.counts["out_of_order"] += 1
        self.last_ended = max(self.last_ended, sid)
        apns_id = headers.get("apns-id") or str(uuid.uuid4())
        if headers.get(":method") == "POST" and headers.get(":path", "").startswith("/3/device/"):
            conn.send_headers(sid, [(":status", "200"), ("apns-id", apns_id)], end_stream=True)
            with self.state.lock:
                self.state.counts["answered"] += 1
        else:
            body = b'{"reason":"BadPath"}'
            conn.send_headers(sid, [(":status", "404"), ("apns-id", apns_id), ("content-length", str(len(body)))])
            conn.send_data(sid, body, end_stream=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ping-interval", type=float, default=0.05)
    p.add_argument("--max-seconds", type=float, default=600.0)
    p.add_argument("--ignore-stdin", action="store_true")
    args = p.parse_args()

    host = "127.0.0.1" if args.host == "localhost" else args.host
    try:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError
    except ValueError:
        print("%s: --host must be a loopback address, not %r" % (PROG, args.host), file=sys.stderr)
        sys.exit(2)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(args.cert, args.key)
    except (OSError, ssl.SSLError) as e:
        print("%s: cannot load --cert/--key: %s" % (PROG, e), file=sys.stderr)
        sys.exit(2)
    context.set_alpn_protocols(["h2"])

    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    stopping = threading.Event()
    stop_reason = []

    def stop(reason):
        if not stop_reason:
            stop_reason.append(reason)
        stopping.set()

    signal.signal(signal.SIGINT, lambda *_: stop("SIGINT"))
    signal.signal(signal.SIGTERM, lambda *_: stop("SIGTERM"))

    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, args.port))
    except OSError as e:
        print("%s: cannot listen on %s:%d: %s" % (PROG, host, args.port, e), file=sys.stderr)
        sys.exit(2)
    listener.listen(64)
    listener.setblocking(False)

    if not args.ignore_stdin:
        def watch_stdin():
            try:
                while os.read(sys.stdin.fileno(), 4096):
                    pass
            except OSError:
                pass
            stop("stdin")
        threading.Thread(target=watch_stdin, daemon=True).start()

    state = State()
    print(json.dumps({"port": listener.getsockname()[1], "host": host}), flush=True)
    deadline = time.monotonic() + args.max_seconds
    connections = []
    while not stopping.is_set():
        if time.monotonic() > deadline:
            stop("max-seconds")
            break
        try:
            ready, _, _ = select.select([listener], [], [], 0.2)
        except InterruptedError:
            continue
        if not ready:
            continue
        try:
            raw, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            continue
        raw.setblocking(True)
        c = Connection(raw, context, state, stopping, args.ping_interval)
        connections.append(c)
        c.start()
    listener.close()
    for c in connections:
        c.shut()
    for c in connections:
        c.join(timeout=5)
    with state.lock:
        summary = dict(state.counts)
        summary["max_ack_ms"] = round(state.max_ack * 1000, 1)
        summary["unanswered_ping_ms"] = round(state.unanswered * 1000, 1)
    summary["stopped_by"] = stop_reason[0] if stop_reason else "unknown"
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
