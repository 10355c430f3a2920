#!/usr/bin/env python3
"""Send notifications with the PyPI package `apns3` (a PyAPNs fork, binary
interface, enhanced format) to a gateway on loopback, and report the error
responses it got as one JSON line:

    {"sent": N, "errors": [{"status": 8, "identifier": k}, ...]}

Used by Herald's tests as a provider "not written by us" against
`herald simulate`. Notification i (1..N) has identifier i and goes to
token sha256(str(i)) (64 hex digits), except at the positions of
--invalid-at, which get the tokens of --invalid in that order.

What apns3 1.0.0 does on its own (read from its source, apns3.py, and seen
against Tests/Interop/apns_gateway.py):

* TLS: it calls the module-level `ssl.wrap_socket(sock, key_file, cert_file)`
  with no CA and no cert_reqs, i.e. it does NOT verify the server at all and
  has no API for a CA. We replace `apns3.wrap_socket` with a function that
  uses an SSLContext verifying the server against --ca and --server-name.
  `ssl.wrap_socket` no longer exists in Python 3.12+, where `import apns3`
  fails; we define a placeholder before importing it so that it still loads.
* TLS 1.3 breaks it: its error-response reader thread select()s the socket
  and then read()s 6 bytes. The server's TLS 1.3 session tickets make the
  socket readable with no application data; the non-blocking read raises
  SSLWantReadError, which it treats as "APNs closed the connection" and
  drops the connection (then reconnects on the next send, and the tickets
  come again). So this script caps TLS at 1.2 by default (the real binary
  gateway never spoke 1.3 either); --tls 1.3 shows the failure.
* Host/port: GatewayConnection has plain `server` and `port` attributes,
  read on the first send (the connection is lazy), so we set them.
* Resend after an error: after calling the response listener it closes the
  connection and means to resend the notifications sent after the failed
  one, but `_resend_notification_by_range` is called with three arguments
  and takes two: the reader thread dies with a TypeError (we print one line
  to stderr instead of the traceback) and nothing is resent. Notifications
  written after the bad one, before the error response was read, are lost.
  The next send starts a new reader thread and a new connection.
* A write that fails (e.g. connection reset after the gateway closed)
  is retried 3 times after sleeping 10, 12 and 14 seconds, then dropped
  silently. With --await-each-error (default) this script waits for the
  answer to each invalid notification before sending on, so no write hits
  a dead connection and every invalid token gets its own error response;
  --await-each-error 0 sends without waiting (fire and forget, as apns3 is
  meant to be used): errors after the first on a connection may then never
  be reported, and sends may stall on those 10-second sleeps.
* A connection that cannot be made (refused, TLS handshake or certificate
  verification failed) is an OSError inside apns3, so it too is retried
  with those sleeps, for every notification. We make connect() and the
  handshake raise a non-OSError instead: the script stops with exit code 2
  and one line on stderr (no JSON).
* Its reader thread is not a daemon and idles for up to 30 s: we exit with
  os._exit after printing.
"""

import argparse
import hashlib
import json
import logging
import os
import socket
import ssl
import sys
import threading
import time

if not hasattr(ssl, "wrap_socket"):  # Python 3.12+: apns3 imports it at load time
    def _missing_wrap_socket(*_args, **_kwargs):
        raise RuntimeError("ssl.wrap_socket is gone; apns3_client.py replaces apns3.wrap_socket")
    ssl.wrap_socket = _missing_wrap_socket

import apns3  # noqa: E402


def token_for(i):
    return hashlib.sha256(str(i).encode("ascii")).hexdigest()


class ConnectFailed(Exception):
    """Not an OSError on purpose: apns3 catches OSError around every write and
    retries after sleeping 10+ seconds (3 times per notification), which
    would turn "no server" or "certificate rejected" into a long hang."""


class FailFastSocket(socket.socket):
    def connect(self, address):
        try:
            super().connect(address)
        except OSError as e:
            raise ConnectFailed(f"cannot connect to {address[0]}:{address[1]}: {e}") from e


def verifying_wrap_socket(ca, cert, key, server_name, tls, handshake_timeout):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # check_hostname and CERT_REQUIRED
    ctx.load_verify_locations(cafile=ca)
    ctx.load_cert_chain(cert, key)
    if tls == "1.2":
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    elif tls == "1.3":
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3

    def wrap(sock, keyfile=None, certfile=None, do_handshake_on_connect=True, **_ignored):
        # apns3 passes (sock, key_file, cert_file[, do_handshake_on_connect]);
        # the identity is already in ctx. The handshake is done here, blocking
        # with a timeout, so that a failure is fatal (ConnectFailed) instead
        # of retried; apns3's own do_handshake() then has nothing left to do.
        # The socket goes back to the blocking mode apns3 had set (enhanced
        # mode: non-blocking).
        mode = sock.gettimeout()
        sock.settimeout(handshake_timeout)
        try:
            tls_sock = ctx.wrap_socket(sock, server_hostname=server_name, do_handshake_on_connect=True)
        except OSError as e:
            raise ConnectFailed(f"TLS handshake with {server_name} failed: {e}") from e
        tls_sock.settimeout(mode)
        return tls_sock
    return wrap


def int_list(text):
    return [int(x) for x in text.split(",") if x.strip()] if text else []


def main(argv=None):
    p = argparse.ArgumentParser(description="Send N notifications with apns3 and report the error responses as JSON.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--cert", required=True, help="client certificate (PEM)")
    p.add_argument("--key", required=True, help="client private key (PEM, unencrypted)")
    p.add_argument("--ca", required=True, help="CA that signed the server certificate (PEM)")
    p.add_argument("--server-name", default="localhost", help="name the server certificate must match (default localhost)")
    p.add_argument("--count", type=int, required=True, help="N: identifiers 1..N")
    p.add_argument("--invalid", default="", metavar="HEX[,HEX...]", help="tokens the gateway answers with an error")
    p.add_argument("--invalid-at", default="", metavar="I[,J...]",
                   help="1-based positions of the --invalid tokens, in order (default: spread evenly)")
    p.add_argument("--await-each-error", type=float, default=5.0, metavar="SECONDS",
                   help="after an invalid notification, wait up to this long for its answer before sending on (0: do not wait)")
    p.add_argument("--wait", type=float, default=5.0, metavar="SECONDS",
                   help="at the end, wait up to this long until every invalid one was answered")
    p.add_argument("--grace", type=float, default=1.5, metavar="SECONDS",
                   help="after the last send, always wait this long for late answers (apns3's reader thread may be in a 1 s sleep)")
    p.add_argument("--tls", choices=["1.2", "1.3", "auto"], default="1.2",
                   help="TLS version (default 1.2; apns3's reader breaks on TLS 1.3 session tickets)")
    p.add_argument("--handshake-timeout", type=float, default=30.0, metavar="SECONDS")
    p.add_argument("--verbose", action="store_true", help="apns3's own log (debug level, with tracebacks) on stderr")
    args = p.parse_args(argv)

    # apns3 logs failed writes with full tracebacks; one line each is enough
    # unless --verbose.
    handler = logging.StreamHandler(sys.stderr)
    formatter = logging.Formatter("apns3: %(levelname)s %(message)s")
    if not args.verbose:
        formatter.formatException = lambda _exc_info: ""
    handler.setFormatter(formatter)
    apns3_log = logging.getLogger("apns3")
    apns3_log.addHandler(handler)
    apns3_log.setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    apns3_log.propagate = False

    invalid = [t.strip().lower() for t in args.invalid.split(",") if t.strip()]
    for t in invalid:
        if len(t) != 64 or any(c not in "0123456789abcdef" for c in t):
            p.error(f"--invalid: {t!r} is not 64 hex digits")
    positions = int_list(args.invalid_at)
    if not positions and invalid:
        positions = [max(1, round((j + 1) * args.count / (len(invalid) + 1))) for j in range(len(invalid))]
    if len(positions) != len(invalid):
        p.error("--invalid-at needs one position per --invalid token")
    if args.count < 1 or any(not 1 <= i <= args.count for i in positions) or len(set(positions)) != len(positions):
        p.error("--invalid-at positions must be distinct, within 1..--count")
    invalid_at = dict(zip(positions, invalid))

    apns3.wrap_socket = verifying_wrap_socket(args.ca, args.cert, args.key, args.server_name, args.tls,
                                              args.handshake_timeout)
    apns3.socket = FailFastSocket

    def quiet_hook(hook_args):
        if issubclass(hook_args.exc_type, ConnectFailed):
            # the reader thread reconnects on its own too
            sys.stderr.write(f"apns3_client: {hook_args.exc_value}\n")
            sys.stderr.flush()
            os._exit(2)
        sys.stderr.write(f"apns3_client: apns3 thread {hook_args.thread.name if hook_args.thread else '?'} "
                         f"died: {hook_args.exc_type.__name__}: {hook_args.exc_value}\n")
    threading.excepthook = quiet_hook

    errors = []
    answered = threading.Condition()

    def listener(response):
        with answered:
            errors.append({"status": int(response["status"]), "identifier": int(response["identifier"])})
            answered.notify_all()

    service = apns3.APNs(use_sandbox=True, cert_file=args.cert, key_file=args.key, enhanced=True)
    gateway = service.gateway_server
    gateway.server = args.host
    gateway.port = args.port
    gateway.register_response_listener(listener)

    def answered_for(identifier):
        return any(e["identifier"] == identifier for e in errors)

    sent = 0
    for i in range(1, args.count + 1):
        bad = invalid_at.get(i)
        payload = apns3.Payload(alert=f"interop {i}", custom={"i": i})
        try:
            gateway.send_notification(bad or token_for(i), payload, identifier=i)
        except ConnectFailed as e:
            sys.stderr.write(f"apns3_client: notification {i}: {e}\n")
            sys.stderr.flush()
            os._exit(2)
        sent += 1
        if bad and args.await_each_error > 0:
            deadline = time.monotonic() + args.await_each_error
            with answered:
                while not answered_for(i) and time.monotonic() < deadline:
                    answered.wait(deadline - time.monotonic())

    # Answers nobody asked for (status 10 shutdown, say) may still be on
    # their way: a short grace period, then until every invalid one was
    # answered or --wait ran out.
    time.sleep(args.grace)
    deadline = time.monotonic() + args.wait
    with answered:
        while len(errors) < len(invalid) and time.monotonic() < deadline:
            answered.wait(deadline - time.monotonic())
        result = {"sent": sent, "errors": list(errors)}
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
