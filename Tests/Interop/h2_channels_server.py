#!/usr/bin/env python3
"""A stand-in for APNs' broadcast channel management API (iOS 18 Live
Activities) built on the PyPI packages `h2` (HTTP/2 frames) and
`cryptography` (ES256 verification), over Python's `ssl` and `socket`. It
shares no code with Herald: Herald's tests point `herald channels` at it.

    h2_channels_server.py --cert server.pem --key server-key.pem
        --token-key key.p8 --key-id KEY1234567 --team-id TEAM123456
        [--bundle-id com.example.app] [--host 127.0.0.1] [--port 0]
        [--max-channels 10000] [--max-seconds 600] [--ignore-stdin]

TLS with ALPN h2 (a client that does not agree on h2 is dropped and
counted), HTTP/2 on every connection, any number of connections, one
thread each. The channels live in memory, for the app --bundle-id only:

    POST   /1/apps/<bundle>/channels      {"message-storage-policy":0|1,"push-type":"LiveActivity"}
           -> 201, the new id (16 random bytes, base64) in `apns-channel-id`
    GET    /1/apps/<bundle>/channels      with `apns-channel-id`
           -> 200 {"message-storage-policy":N,"push-type":"LiveActivity"}
    DELETE /1/apps/<bundle>/channels      with `apns-channel-id` -> 204
    GET    /1/apps/<bundle>/all-channels  -> 200 {"channels":[ids, oldest first]}

Errors are `{"reason": "..."}`, checked in this order: no or wrong
`authorization: bearer <JWT>` 403 MissingProviderToken / InvalidProviderToken
(/ ExpiredProviderToken when `iat` is over an hour old); a path that is none
of the above 404 BadPath; another bundle id 403 TopicMismatch; an
`apns-request-id` that is not a UUID 400 BadMessageId; a method the path
does not take 405 MethodNotAllowed; a body that is not exactly those two
keys with those values 400 BadRequestParams; more than --max-channels
400 CannotCreateChannelConfig; no `apns-channel-id` 400 MissingChannelId, not
base64 400 BadChannelId, no such channel 404 ChannelNotRegistered.

The JWT must be `{"alg":"ES256","kid":KEY_ID}.{"iss":TEAM_ID,"iat":N}` with
an ES256 signature (raw r||s, base64url) by the private half of --token-key
(a PKCS#8 PEM .p8 file); it is checked with the public half only.

Every answer carries `apns-request-id`: the request's own, or a fresh UUID
when the request had none (as APNs does).

Start-up: one line `{"port": P, "host": "127.0.0.1"}` on stdout once it
listens (--port 0 picks a free port). It stops on stdin EOF (so it ends with
the test that holds the pipe; --ignore-stdin when running it by hand with
</dev/null), SIGTERM, SIGINT, or after --max-seconds; it then closes every
connection and prints one line:

    {"requests": n, "channels": n, "created": n, "deleted": n,
     "methods": {"POST": n, "GET": n, "DELETE": n},
     "operations": {"create": n, "read": n, "delete": n, "list": n, "other": n},
     "statuses": {"201": n, ...}, "reasons": {"ChannelNotRegistered": n, ...},
     "auth": {"verified": n, "failures": n, "missing": n, "expired": n, "tokens": n},
     "request_ids": {"uuid": n, "missing": n, "invalid": n},
     "headers_seen": ["apns-channel-id", "apns-request-id", ...],
     "authorities": ["localhost"], "schemes": ["https"],
     "connections": n, "alpn_failures": n, "handshake_failures": n,
     "protocol_errors": n, "stopped_by": "stdin"}

`auth.verified` counts requests whose JWT verified, `auth.failures` those
refused 403 (missing and expired included), `auth.tokens` the distinct JWTs
that verified. `headers_seen` are the regular header names of all requests
(pseudo-headers left out). Loopback only: --host must be 127.x.y.z or ::1.
"""

import argparse
import base64
import binascii
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
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

PROG = "h2_channels_server.py"
TOKEN_LIFETIME = 3600


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def is_uuid(text):
    if len(text) != 36:
        return False
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return all(text[i] == "-" for i in (8, 13, 18, 23))


def is_channel_id(text):
    if not text or len(text) > 256 or len(text) % 4:
        return False
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


class State:
    """Channels and counters, shared by the connection threads."""

    def __init__(self, args, public_key):
        self.args = args
        self.public_key = public_key
        self.lock = threading.Lock()
        self.channels = {}  # id -> storage policy, insertion order = creation order
        self.verified_tokens = set()
        self.counts = {
            "requests": 0, "created": 0, "deleted": 0,
            "methods": {}, "operations": {}, "statuses": {}, "reasons": {},
            "auth": {"verified": 0, "failures": 0, "missing": 0, "expired": 0},
            "request_ids": {"uuid": 0, "missing": 0, "invalid": 0},
            "connections": 0, "alpn_failures": 0, "handshake_failures": 0, "protocol_errors": 0,
        }
        self.headers_seen = set()
        self.authorities = set()
        self.schemes = set()

    def bump(self, group, key, n=1):
        table = self.counts[group]
        table[key] = table.get(key, 0) + n

    # -- authentication ----------------------------------------------------

    def check_token(self, authorization):
        """None when the JWT verifies, else the 403 reason. Caller holds the lock."""
        if not authorization:
            self.counts["auth"]["missing"] += 1
            return "MissingProviderToken"
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return "InvalidProviderToken"
        if token in self.verified_tokens:
            return None
        parts = token.split(".")
        if len(parts) != 3:
            return "InvalidProviderToken"
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
        except (ValueError, binascii.Error):
            return "InvalidProviderToken"
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return "InvalidProviderToken"
        if header.get("alg") != "ES256" or header.get("kid") != self.args.key_id:
            return "InvalidProviderToken"
        if claims.get("iss") != self.args.team_id:
            return "InvalidProviderToken"
        iat = claims.get("iat")
        if not isinstance(iat, int) or isinstance(iat, bool):
            return "InvalidProviderToken"
        if len(signature) != 64:
            return "InvalidProviderToken"
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        try:
            self.public_key.verify(der, (parts[0] + "." + parts[1]).encode("ascii"), ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, ValueError):
            return "InvalidProviderToken"
        if iat < time.time() - TOKEN_LIFETIME:
            self.counts["auth"]["expired"] += 1
            return "ExpiredProviderToken"
        self.verified_tokens.add(token)
        return None

    # -- requests -----------------------------------------------------------

    def handle(self, headers, body):
        """(status, answer headers, body bytes) for one request."""
        with self.lock:
            return self._handle(headers, body)

    def _handle(self, headers, body):
        c = self.counts
        c["requests"] += 1
        pseudo = {k: v for k, v in headers if k.startswith(":")}
        regular = {}
        for k, v in headers:
            if not k.startswith(":"):
                self.headers_seen.add(k)
                regular.setdefault(k, v)
        method, path = pseudo.get(":method", ""), pseudo.get(":path", "")
        if ":authority" in pseudo:
            self.authorities.add(pseudo[":authority"])
        if ":scheme" in pseudo:
            self.schemes.add(pseudo[":scheme"])
        self.bump("methods", method)

        request_id = regular.get("apns-request-id")
        if request_id is None:
            c["request_ids"]["missing"] += 1
            echo = str(uuid.uuid4())
        elif is_uuid(request_id):
            c["request_ids"]["uuid"] += 1
            echo = request_id
        else:
            c["request_ids"]["invalid"] += 1
            echo = request_id

        def answer(status, reason=None, extra=(), content=None):
            self.bump("statuses", str(status))
            out = [("apns-request-id", echo)] + list(extra)
            data = b""
            if reason is not None:
                self.bump("reasons", reason)
                data = json.dumps({"reason": reason}, separators=(",", ":")).encode()
            elif content is not None:
                data = json.dumps(content, separators=(",", ":")).encode()
            if data:
                out.append(("content-type", "application/json"))
            return status, out, data

        operation = "other"
        prefix = "/1/apps/"
        rest = path[len(prefix):] if path.startswith(prefix) else None
        bundle, _, resource = (rest or "").rpartition("/")
        if rest is not None and resource == "channels":
            operation = {"POST": "create", "GET": "read", "DELETE": "delete"}.get(method, "other")
        elif rest is not None and resource == "all-channels":
            operation = "list" if method == "GET" else "other"
        self.bump("operations", operation)

        reason = self.check_token(regular.get("authorization"))
        if reason is not None:
            c["auth"]["failures"] += 1
            return answer(403, reason)
        c["auth"]["verified"] += 1

        if rest is None or not bundle or resource not in ("channels", "all-channels") or "?" in path:
            return answer(404, "BadPath")
        if bundle != self.args.bundle_id:
            return answer(403, "TopicMismatch")
        if request_id is not None and not is_uuid(request_id):
            return answer(400, "BadMessageId")
        if operation == "other":
            return answer(405, "MethodNotAllowed")

        if operation == "list":
            return answer(200, content={"channels": list(self.channels)})
        if operation == "create":
            try:
                doc = json.loads(body.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                doc = None
            policy = doc.get("message-storage-policy") if isinstance(doc, dict) else None
            if (not isinstance(doc, dict) or set(doc) != {"message-storage-policy", "push-type"}
                    or isinstance(policy, bool) or policy not in (0, 1)
                    or doc.get("push-type") != "LiveActivity"):
                return answer(400, "BadRequestParams")
            if len(self.channels) >= self.args.max_channels:
                return answer(400, "CannotCreateChannelConfig")
            while True:
                channel_id = base64.b64encode(secrets.token_bytes(16)).decode("ascii")
                if channel_id not in self.channels:
                    break
            self.channels[channel_id] = policy
            c["created"] += 1
            return answer(201, extra=[("apns-channel-id", channel_id)])

        channel_id = regular.get("apns-channel-id")
        if channel_id is None:
            return answer(400, "MissingChannelId")
        if not is_channel_id(channel_id):
            return answer(400, "BadChannelId")
        if channel_id not in self.channels:
            return answer(404, "ChannelNotRegistered")
        if operation == "delete":
            del self.channels[channel_id]
            c["deleted"] += 1
            return answer(204)
        return answer(200, content={"message-storage-policy": self.channels[channel_id], "push-type": "LiveActivity"})

    def summary(self, stopped_by):
        with self.lock:
            out = dict(self.counts)
            out["channels"] = len(self.channels)
            out["auth"] = dict(self.counts["auth"], tokens=len(self.verified_tokens))
            out["headers_seen"] = sorted(self.headers_seen)
            out["authorities"] = sorted(self.authorities)
            out["schemes"] = sorted(self.schemes)
            out["stopped_by"] = stopped_by
            return out


class Connection(threading.Thread):
    """One client: TLS handshake, then HTTP/2 until the client or the server ends it."""

    def __init__(self, raw, context, state, stopping):
        super().__init__(daemon=True)
        self.raw = raw
        self.context = context
        self.state = state
        self.stopping = stopping
        self.sock = None

    def shut(self):
        """From the main thread at shutdown: makes the reader's recv return."""
        for s in (self.sock, self.raw):
            if s is None:
                continue
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
                with self.state.lock:
                    self.state.counts["handshake_failures"] += 1
                return
            if self.sock.selected_alpn_protocol() != "h2":
                with self.state.lock:
                    self.state.counts["alpn_failures"] += 1
                return
            with self.state.lock:
                self.state.counts["connections"] += 1
            self.sock.settimeout(0.5)
            self.serve()
        except h2.exceptions.ProtocolError:
            with self.state.lock:
                self.state.counts["protocol_errors"] += 1
        except OSError:
            pass
        finally:
            for s in (self.sock, self.raw):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass

    def serve(self):
        conn = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        self.sock.sendall(conn.data_to_send())
        requests = {}  # stream id -> [headers, body]
        pending = {}  # stream id -> answer body not yet sent (flow control)

        def flush_bodies():
            for sid in list(pending):
                data = pending[sid]
                try:
                    room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                except h2.exceptions.StreamClosedError:
                    del pending[sid]
                    continue
                while data and room > 0:
                    chunk, data = data[:room], data[room:]
                    conn.send_data(sid, chunk, end_stream=not data)
                    room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size) if data else 0
                if data:
                    pending[sid] = data
                else:
                    del pending[sid]

        while not self.stopping.is_set():
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except (ssl.SSLError, OSError):
                return
            if not data:
                return
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    requests[event.stream_id] = [list(event.headers), b""]
                    if event.stream_ended is not None:
                        self.respond(conn, event.stream_id, requests.pop(event.stream_id), pending)
                elif isinstance(event, h2.events.DataReceived):
                    r = requests.get(event.stream_id)
                    if r is not None and len(r[1]) < (1 << 20):
                        r[1] += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    if event.stream_ended is not None and r is not None:
                        self.respond(conn, event.stream_id, requests.pop(event.stream_id), pending)
                elif isinstance(event, h2.events.StreamEnded):
                    r = requests.pop(event.stream_id, None)
                    if r is not None:
                        self.respond(conn, event.stream_id, r, pending)
                elif isinstance(event, h2.events.StreamReset):
                    requests.pop(event.stream_id, None)
                    pending.pop(event.stream_id, None)
                elif isinstance(event, h2.events.WindowUpdated):
                    pass
                elif isinstance(event, h2.events.ConnectionTerminated):
                    out = conn.data_to_send()
                    if out:
                        self.sock.sendall(out)
                    return
            flush_bodies()
            out = conn.data_to_send()
            if out:
                self.sock.sendall(out)
        # Stopping: say goodbye on the connection.
        try:
            conn.close_connection()
            self.sock.sendall(conn.data_to_send())
        except (OSError, h2.exceptions.ProtocolError):
            pass

    def respond(self, conn, sid, request, pending):
        headers, body = request
        status, answer_headers, data = self.state.handle(headers, body)
        out = [(":status", str(status))] + answer_headers
        if data:
            out.append(("content-length", str(len(data))))
        conn.send_headers(sid, out, end_stream=not data)
        if data:
            pending[sid] = data


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cert", required=True, help="server certificate (PEM), e.g. server.pem from herald certs")
    p.add_argument("--key", required=True, help="its private key (PEM)")
    p.add_argument("--token-key", required=True, help="the provider token key (.p8); only its public half is used")
    p.add_argument("--key-id", required=True)
    p.add_argument("--team-id", required=True)
    p.add_argument("--bundle-id", default="com.example.app")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--max-channels", type=int, default=10000)
    p.add_argument("--max-seconds", type=float, default=600.0)
    p.add_argument("--ignore-stdin", action="store_true", help="do not stop on stdin EOF")
    args = p.parse_args()

    host = "127.0.0.1" if args.host == "localhost" else args.host
    try:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError
    except ValueError:
        print("%s: --host must be a loopback address (127.x.y.z or ::1), not %r" % (PROG, args.host), file=sys.stderr)
        sys.exit(2)

    try:
        with open(args.token_key, "rb") as f:
            private = serialization.load_pem_private_key(f.read(), password=None)
    except (OSError, ValueError, TypeError) as e:
        print("%s: cannot read --token-key %s: %s" % (PROG, args.token_key, e), file=sys.stderr)
        sys.exit(2)
    if not isinstance(private, ec.EllipticCurvePrivateKey) or private.curve.name != "secp256r1":
        print("%s: --token-key %s is not a P-256 key" % (PROG, args.token_key), file=sys.stderr)
        sys.exit(2)
    # Only the public half from here on, as Apple would have it.
    public_key = serialization.load_pem_public_key(private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    del private

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(args.cert, args.key)
    except (OSError, ssl.SSLError) as e:
        print("%s: cannot load --cert/--key: %s" % (PROG, e), file=sys.stderr)
        sys.exit(2)
    context.set_alpn_protocols(["h2"])

    # A Process started from a test thread may pass on a mask that blocks these.
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

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
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

    state = State(args, public_key)
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
        except OSError:
            break
        raw.setblocking(True)
        worker = Connection(raw, context, state, stopping)
        connections = [c for c in connections if c.is_alive()]
        connections.append(worker)
        worker.start()

    listener.close()
    # Connection threads see `stopping` within their 0.5 s recv timeout; a
    # shutdown wakes any that sit in a handshake.
    grace = time.monotonic() + 1.0
    for c in connections:
        c.join(max(0.0, grace - time.monotonic()))
    for c in connections:
        if c.is_alive():
            c.shut()
    last = time.monotonic() + 2.0
    for c in connections:
        c.join(max(0.0, last - time.monotonic()))
    print(json.dumps(state.summary(stop_reason[0] if stop_reason else "unknown"), separators=(",", ":")), flush=True)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
