#!/usr/bin/env python3
"""An independent stand-in for Apple's legacy *binary* APNs gateway.

Written from the protocol description alone (stdlib only, no Herald code), so
that Herald's tests can talk to "code not written by us". It speaks the three
notification formats (simple 0, enhanced 1, frame 2), answers the first bad
notification on a connection with the 6-byte error response
``|8|status|identifier|`` and then closes the socket abruptly, without reading
what the provider sent after it (the unread bytes make Linux reset the
connection, as the real gateway's did). It can also misbehave on purpose:
close silently every N notifications, announce a shutdown (status 10), lose
an error response, stall connections, or handshake slowly.

Start-up prints one JSON line ``{"port": P}``; on exit one JSON line of
counters. It stops on stdin EOF, SIGTERM/SIGINT, or after --max-seconds.
Loopback only. See README.md beside this file.
"""

import argparse
import fcntl
import ipaddress
import json
import os
import select
import signal
import socket
import ssl
import struct
import sys
import threading
import time

READ_MAX = 256 * 1024          # bytes asked for per recv
MAX_FRAME = 1024 * 1024        # a frame (command 2) longer than this is malformed
HANDSHAKE_TIMEOUT = 10.0       # seconds a client gets to finish the TLS handshake
POLL_MS = 250                  # how often idle connection threads look at the stop flag
LOG_FLUSH_LINES = 50_000       # a connection's log buffer is written out at this size
SIOCOUTQNSD = 0x894B           # Linux: bytes in the send queue not yet sent
DRAIN_SECONDS = 0.5            # longest wait for an error response to leave the host

ENHANCED_HEAD = struct.Struct(">IIH")   # identifier, expiry, token length
U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
ITEM_HEAD = struct.Struct(">BH")        # item id, item length
ERROR_RESPONSE = struct.Struct(">BBI")  # 8, status, identifier

# Statuses of the error response.
PROCESSING_ERROR = 1
MISSING_TOKEN = 2
MISSING_PAYLOAD = 4
INVALID_TOKEN_SIZE = 5
INVALID_PAYLOAD_SIZE = 7
INVALID_TOKEN = 8
SHUTDOWN = 10
UNKNOWN_COMMAND = 255



def token_and_payload(data, ts, tlen, n):
    """The token at `ts` (`tlen` bytes), then a 2-byte length and the payload,
    for the simple and enhanced formats: (token, payload, end), or None when
    the notification is not all there yet."""
    if n - ts < tlen + 2:
        return None
    ps = ts + tlen + 2
    plen = U16.unpack_from(data, ts + tlen)[0]
    if n - ps < plen:
        return None
    return data[ts:ts + tlen], data[ps:ps + plen], ps + plen

class Gateway:
    def __init__(self, args):
        self.args = args
        self.payload_limit = args.payload_limit
        self.invalid = set()
        if args.invalid_tokens:
            with open(args.invalid_tokens, encoding="ascii") as f:
                for line in f:
                    line = line.strip().lower()
                    if line and not line.startswith("#"):
                        self.invalid.add(bytes.fromhex(line))
        self.stop = threading.Event()
        self.lock = threading.Lock()          # counters and the log file
        self.accepted_total = 0               # lifetime count, drives the *-every options
        self.responses_due = 0                # error responses that were to be written
        self.rejected = {}
        self.connections = 0
        self.silent_closes = 0
        self.shutdowns = 0
        self.lost_answers = 0
        self.stalled = 0
        self.handshake_failures = 0
        self.live = {}                        # connection number -> (thread, log buffer holder)
        self.log = open(args.log, "a", encoding="ascii") if args.log else None
        self.json_cache = {}

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        ctx.load_verify_locations(cafile=args.ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
        if args.max_tls == "1.2":
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        self.ctx = ctx

    # ---- validation -------------------------------------------------------

    def payload_ok(self, payload):
        """A JSON object (UTF-8) whose "aps" is an object. Memoised: providers
        tend to send the same payload many times."""
        cache = self.json_cache
        ok = cache.get(payload)
        if ok is None:
            try:
                obj = json.loads(payload.decode("utf-8"))
                ok = isinstance(obj, dict) and isinstance(obj.get("aps"), dict)
            except (UnicodeDecodeError, ValueError, RecursionError):
                ok = False
            if len(cache) >= 4096:
                cache.clear()
            cache[payload] = ok
        return ok

    def validate(self, token, payload, priority):
        if not token:
            return MISSING_TOKEN
        if len(token) != 32:
            return INVALID_TOKEN_SIZE
        if not payload:
            return MISSING_PAYLOAD
        if len(payload) > self.payload_limit:
            return INVALID_PAYLOAD_SIZE
        if not self.payload_ok(payload):
            return PROCESSING_ERROR
        if priority is not None and priority != 10 and priority != 5:
            return PROCESSING_ERROR
        if token in self.invalid:
            return INVALID_TOKEN
        return 0

    def parse_frame(self, data, start, end):
        """Items of one command-2 frame -> (status, identifier, token).
        identifier is -1 when the frame carries none (the error response
        then says 0)."""
        token = payload = priority = None
        ident = -1
        pos = start
        unpack_item = ITEM_HEAD.unpack_from
        while pos < end:
            if end - pos < 3:
                return PROCESSING_ERROR, ident, None
            item, length = unpack_item(data, pos)
            ds = pos + 3
            pos = ds + length
            if pos > end:
                return PROCESSING_ERROR, ident, None
            if item == 1:
                token = data[ds:pos]
            elif item == 2:
                payload = data[ds:pos]
            elif item == 3:
                if length != 4:
                    return PROCESSING_ERROR, ident, None
                ident = U32.unpack_from(data, ds)[0]
            elif item == 4:
                if length != 4:
                    return PROCESSING_ERROR, ident, None
            elif item == 5:
                if length != 1:
                    return PROCESSING_ERROR, ident, None
                priority = data[ds]
            else:
                return PROCESSING_ERROR, ident, None
        return self.validate(token, payload, priority), ident, token

    def scan(self, data):
        """Every complete notification at the start of data, up to the first
        bad one. Returns (good, error, consumed): good is a list of
        (token, identifier, command); error is None or (status, identifier,
        silent); consumed is how many bytes were used (the rest is an
        incomplete notification, kept for the next read)."""
        good = []
        append = good.append
        n = len(data)
        pos = 0
        validate = self.validate
        while pos < n:
            cmd = data[pos]
            if cmd == 1:
                if n - pos < 11:
                    break
                ident, _expiry, tlen = ENHANCED_HEAD.unpack_from(data, pos + 1)
                parsed = token_and_payload(data, pos + 11, tlen, n)
                if parsed is None:
                    break
                token, payload, pos = parsed
                status = validate(token, payload, None)
                if status:
                    return good, (status, ident, False), pos
                append((token, ident, 1))
            elif cmd == 2:
                if n - pos < 5:
                    break
                flen = U32.unpack_from(data, pos + 1)[0]
                if flen > MAX_FRAME:
                    return good, (PROCESSING_ERROR, 0, False), n
                if n - pos - 5 < flen:
                    break
                status, ident, token = self.parse_frame(data, pos + 5, pos + 5 + flen)
                pos += 5 + flen
                if status:
                    return good, (status, max(ident, 0), False), pos
                append((token, ident, 2))
            elif cmd == 0:
                if n - pos < 3:
                    break
                tlen = U16.unpack_from(data, pos + 1)[0]
                parsed = token_and_payload(data, pos + 3, tlen, n)
                if parsed is None:
                    break
                token, payload, pos = parsed
                status = validate(token, payload, None)
                if status:
                    return good, (status, 0, True), pos
                append((token, -1, 0))
            else:
                return good, (UNKNOWN_COMMAND, 0, False), n
        return good, None, pos

    # ---- connections ------------------------------------------------------

    def serve(self, listener):
        listener.settimeout(0.25)
        while not self.stop.is_set():
            try:
                raw, _addr = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                if self.stop.is_set():
                    break
                time.sleep(0.05)
                continue
            with self.lock:
                self.connections += 1
                number = self.connections
                holder = {"lines": []}
                t = threading.Thread(target=self.connection, args=(raw, number, holder),
                                     name=f"conn-{number}", daemon=True)
                self.live[number] = (t, holder)
            t.start()

    def connection(self, raw, number, holder):
        sock = None
        try:
            if self.args.handshake_delay > 0 and self.stop.wait(self.args.handshake_delay):
                return
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                sock = self.handshake(raw)
            except (OSError, ValueError):
                with self.lock:
                    self.handshake_failures += 1
                return
            if sock is None:  # stopping
                return
            if number <= self.args.stall_connections:
                with self.lock:
                    self.stalled += 1
                self.stall(sock)
                return
            self.pump(sock, number, holder)
        finally:
            # Abrupt close: no close_notify, and whatever the provider sent
            # that was not read yet makes the kernel answer with RST.
            try:
                (sock or raw).close()
            except OSError:
                pass
            self.flush_log(holder)
            with self.lock:
                self.live.pop(number, None)

    def handshake(self, raw):
        """The TLS handshake, non-blocking so that a stop is noticed within
        POLL_MS; at most HANDSHAKE_TIMEOUT seconds."""
        raw.setblocking(False)
        sock = self.ctx.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT
        while True:
            try:
                sock.do_handshake()
                return sock
            except ssl.SSLWantReadError:
                events = select.POLLIN
            except ssl.SSLWantWriteError:
                events = select.POLLOUT
            except BaseException:
                sock.close()
                raise
            if self.stop.is_set():
                sock.close()
                return None
            if time.monotonic() > deadline:
                sock.close()
                raise TimeoutError("TLS handshake timed out")
            poller = select.poll()
            poller.register(sock.fileno(), events)
            poller.poll(POLL_MS)

    def stall(self, sock):
        """Never read again; keep the socket until the client hangs up or the
        server stops. POLLRDHUP (no POLLIN) wakes us on FIN/RST, not on data."""
        poller = select.poll()
        poller.register(sock.fileno(), getattr(select, "POLLRDHUP", 0x2000) | select.POLLHUP | select.POLLERR)
        while not self.stop.is_set():
            if poller.poll(POLL_MS):
                return

    def pump(self, sock, number, holder):
        sock.setblocking(False)
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        pending = b""
        lines = holder["lines"]
        log = self.log is not None
        while not self.stop.is_set():
            try:
                chunk = sock.recv(READ_MAX)
            except ssl.SSLWantReadError:
                poller.poll(POLL_MS)
                continue
            except ssl.SSLWantWriteError:
                time.sleep(0.001)
                continue
            except OSError:
                return
            if not chunk:
                return
            data = pending + chunk if pending else chunk
            good, error, consumed = self.scan(data)
            pending = data[consumed:]

            # Lifetime thresholds (--close-every, --shutdown-every) may cut
            # the batch short; they are counted under the lock so that
            # concurrent connections share one count.
            action = None
            k = len(good)
            with self.lock:
                total = self.accepted_total
                if k:
                    limit = k
                    se = self.args.shutdown_every
                    if se:
                        d = se - total % se
                        if d <= limit:
                            limit, action = d, "shutdown"
                    ce = self.args.close_every
                    if ce:
                        d = ce - total % ce
                        if d <= limit:
                            limit, action = d, "close"
                    k = limit
                    self.accepted_total = total + k
                if error is not None and action is None:
                    status = str(error[0])
                    self.rejected[status] = self.rejected.get(status, 0) + 1
            if k and log:
                for token, ident, _cmd in good[:k] if k < len(good) else good:
                    lines.append(f"{token.hex()} {ident} {number}\n")
                if len(lines) >= LOG_FLUSH_LINES:
                    self.flush_log(holder)
                    lines = holder["lines"]

            if action == "close":
                with self.lock:
                    self.silent_closes += 1
                return
            if action == "shutdown":
                _token, ident, cmd = good[k - 1]
                if cmd == 0:
                    with self.lock:
                        self.silent_closes += 1
                    return
                with self.lock:
                    self.shutdowns += 1
                self.respond(sock, SHUTDOWN, max(ident, 0))
                return
            if error is not None:
                status, ident, silent = error
                if silent:
                    with self.lock:
                        self.silent_closes += 1
                    return
                self.respond(sock, status, ident)
                return

    def respond(self, sock, status, ident):
        """Write the error response (unless --lose-answer-every says this one
        is lost); the caller then closes abruptly."""
        with self.lock:
            self.responses_due += 1
            lose = self.args.lose_answer_every and self.responses_due % self.args.lose_answer_every == 0
            if lose:
                self.lost_answers += 1
        if lose:
            return
        try:
            sock.settimeout(2.0)
            sock.sendall(ERROR_RESPONSE.pack(8, status, ident))
        except OSError:
            return
        # close() with unread input sends RST and drops whatever is still in
        # the send queue: wait (briefly, without reading) until the response
        # has actually been transmitted, so that only --lose-answer-every
        # loses answers.
        deadline = time.monotonic() + DRAIN_SECONDS
        fd = sock.fileno()
        buf = bytearray(4)
        while time.monotonic() < deadline:
            try:
                fcntl.ioctl(fd, SIOCOUTQNSD, buf)
            except OSError:
                return
            if int.from_bytes(buf, sys.byteorder) == 0:
                return
            time.sleep(0.0005)

    def flush_log(self, holder):
        lines = holder["lines"]
        if not lines:
            return
        holder["lines"] = []
        if self.log is None:
            return
        with self.lock:
            self.log.write("".join(lines))
            self.log.flush()

    # ---- life cycle -------------------------------------------------------

    def shutdown(self):
        self.stop.set()
        with self.lock:
            live = list(self.live.values())
        deadline = time.monotonic() + 3.0
        for t, _holder in live:
            t.join(max(0.0, deadline - time.monotonic()))
        for _t, holder in live:
            self.flush_log(holder)
        if self.log is not None:
            with self.lock:
                self.log.flush()
                self.log.close()
                self.log = None

    def counters(self):
        with self.lock:
            return {
                "accepted": self.accepted_total,
                "rejected": dict(sorted(self.rejected.items(), key=lambda kv: int(kv[0]))),
                "connections": self.connections,
                "silent_closes": self.silent_closes,
                "shutdowns": self.shutdowns,
                "lost_answers": self.lost_answers,
                "stalled": self.stalled,
                "handshake_failures": self.handshake_failures,
            }


def loopback(host):
    if host == "localhost":
        return "127.0.0.1"
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return None
    return host if addr.is_loopback else None


def main(argv=None):
    p = argparse.ArgumentParser(description="A stand-in for Apple's legacy binary APNs gateway (loopback only).")
    p.add_argument("--host", default="127.0.0.1", help="loopback address: 127.x.y.z or ::1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--cert", required=True, help="server certificate (PEM)")
    p.add_argument("--key", required=True, help="server private key (PEM)")
    p.add_argument("--ca", required=True, help="CA that signs client certificates (PEM); a client certificate is required")
    p.add_argument("--payload-limit", type=int, default=2048)
    p.add_argument("--invalid-tokens", metavar="FILE", help="hex tokens, one a line, answered with status 8")
    p.add_argument("--log", metavar="FILE", help="append '<token hex> <identifier or -1> <connection>' per accepted notification")
    p.add_argument("--close-every", type=int, default=0, metavar="N", help="close silently after every Nth accepted notification (lifetime count)")
    p.add_argument("--shutdown-every", type=int, default=0, metavar="M", help="answer status 10 after every Mth accepted notification, then close")
    p.add_argument("--lose-answer-every", type=int, default=0, metavar="K", help="every Kth error response is not written (silent close)")
    p.add_argument("--stall-connections", type=int, default=0, metavar="N", help="the first N connections handshake, then are never read")
    p.add_argument("--handshake-delay", type=float, default=0.0, metavar="SECONDS", help="sleep before each TLS handshake")
    p.add_argument("--max-tls", choices=["1.2", "1.3"], default="1.3", help="highest TLS version offered (default 1.3)")
    p.add_argument("--max-seconds", type=float, default=600.0, help="exit after this long")
    p.add_argument("--ignore-stdin", action="store_true", help="do not stop on stdin EOF (for running by hand with </dev/null)")
    args = p.parse_args(argv)

    for name in ("close_every", "shutdown_every", "lose_answer_every", "stall_connections"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0")
    host = loopback(args.host)
    if host is None:
        p.error(f"listens on loopback only (127.x.y.z or ::1), not {args.host}")

    gateway = Gateway(args)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, args.port))
    listener.listen(512)
    port = listener.getsockname()[1]

    def on_signal(_signum, _frame):
        gateway.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    if not args.ignore_stdin:
        def watch_stdin():
            try:
                while os.read(sys.stdin.fileno(), 65536):
                    pass
            except Exception:  # closed or missing stdin counts as EOF
                pass
            gateway.stop.set()
        threading.Thread(target=watch_stdin, name="stdin", daemon=True).start()

    acceptor = threading.Thread(target=gateway.serve, args=(listener,), name="accept", daemon=True)
    acceptor.start()
    sys.stdout.write(json.dumps({"port": port}) + "\n")
    sys.stdout.flush()

    deadline = time.monotonic() + args.max_seconds
    while not gateway.stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            break
        gateway.stop.wait(min(left, 0.5))
    gateway.stop.set()
    acceptor.join(2.0)
    listener.close()
    gateway.shutdown()
    try:
        sys.stdout.write(json.dumps(gateway.counters()) + "\n")
        sys.stdout.flush()
    except OSError:  # nobody reads any more (the parent is gone)
        sys.stdout = open(os.devnull, "w")
    return 0


if __name__ == "__main__":
    sys.exit(main())
