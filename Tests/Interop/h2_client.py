#!/usr/bin/env python3
"""An APNs provider over HTTP/2 built on the PyPI package `h2` (hyper-h2, a
sans-I/O HTTP/2 state machine) with Python's `ssl` and `socket`, and the
PyPI package `cryptography` for the ES256 provider token. It shares no code
with Herald: Herald's tests run it against `herald simulate --http2`.

    h2_client.py --port P --ca ca.pem --key-file key.p8 --key-id KEY1234567
        --team-id TEAM123456 --count N [--host 127.0.0.1] [--server-name localhost]
        [--topic com.example.app] [--token-at I:HEX ...] [--max-in-flight 1000]
        [--timeout 120] [--reconnects 3]

Request i (1..N) goes to `POST /3/device/<sha256(str(i)) in hex>`, or to the
token given by `--token-at i:HEX`, with the headers `apns-topic`,
`apns-push-type: alert`, `apns-priority: 10`, a fresh `apns-id` (a UUID)
and `authorization: bearer <JWT>`, and an alert payload as the body.

The provider token is one JWT, signed once here: header
`{"alg":"ES256","kid":KEY_ID}`, claims `{"iss":TEAM_ID,"iat":now}`, each
part base64url without padding, the signature ECDSA P-256 / SHA-256 as raw
r||s (32 + 32 bytes, not DER), all from the PKCS#8 PEM `.p8` key file.

Streams: nothing is sent before the server's first SETTINGS frame; then at
most SETTINGS_MAX_CONCURRENT_STREAMS (and --max-in-flight) streams are open
at once, re-read after every SETTINGS the server sends (APNs starts a
token-authenticated connection at 1 stream and raises the limit once a valid
token was seen). h2 applies and acknowledges the server's SETTINGS itself.

If the server sends GOAWAY, or refuses a stream (REFUSED_STREAM), what it
did not process is sent again on a new connection (at most --reconnects
times); a stream that ends otherwise without an answer is reported as
unanswered, never sent twice.

Prints one JSON line:

    {"sent": N, "answered": N, "unanswered": 0,
     "statuses": {"200": n, "400": n, ...}, "reasons": {"BadDeviceToken": n, ...},
     "apns_ids": {"echoed": n, "missing": n, "mismatched": n},
     "errors": [{"index": i, "token": HEX, "status": 400, "reason": "...",
                 "timestamp": ms or null, "apns_id": "...", "echoed": "..."}],
     "limits": [1, 1000], "limit_rose": true, "max_in_flight": n,
     "max_in_flight_at_limit_1": 1, "connections": 1, "goaways": 0,
     "resent": 0, "seconds": t}

`limits` is every SETTINGS_MAX_CONCURRENT_STREAMS value the server announced,
in order (repeats of the current value left out); `max_in_flight_at_limit_1`
is the most streams this client had open while the limit was 1 (it must
never be above 1). Exit status 0 once the line is printed (even with
unanswered requests); 2 with one line on stderr and no JSON if the
connection, TLS handshake or ALPN fails.
"""

import argparse
import base64
import hashlib
import json
import socket
import ssl
import sys
import time
import uuid

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def provider_token(key_file, key_id, team_id, now=None):
    """An ES256 JWT for APNs, signed with the P-256 key in the .p8 (PKCS#8 PEM) file."""
    with open(key_file, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise SystemExit("h2_client.py: %s is not a P-256 private key" % key_file)
    header = {"alg": "ES256", "kid": key_id}
    claims = {"iss": team_id, "iat": int(now if now is not None else time.time())}
    signing_input = (
        b64url(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + b64url(json.dumps(claims, separators=(",", ":")).encode())
    )
    der = key.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(der)
    return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def token_for(i):
    return hashlib.sha256(str(i).encode("ascii")).hexdigest()


class Request:
    __slots__ = ("index", "token", "apns_id", "body", "stream", "status", "headers", "data", "sends")

    def __init__(self, index, token):
        self.index = index
        self.token = token
        self.apns_id = str(uuid.uuid4())
        self.body = json.dumps({"aps": {"alert": {"body": "h2 interop %d" % index}}}, separators=(",", ":")).encode()
        self.stream = None
        self.status = None
        self.headers = {}
        self.data = b""
        self.sends = 0


class ConnectFailed(Exception):
    pass


class Client:
    def __init__(self, args, jwt):
        self.args = args
        self.jwt = jwt
        self.context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=args.ca)
        self.context.set_alpn_protocols(["h2"])
        self.authority = args.server_name
        # What waits to be sent, answers, and what the server told us.
        self.queue = []
        self.done = []
        self.unanswered = []
        self.limits = []
        self.limit = None
        self.max_in_flight = 0
        self.max_in_flight_at_limit_1 = 0
        self.connections = 0
        self.goaways = 0
        self.resent = 0

    # One connection: runs until the queue is empty and nothing is in flight,
    # or the server sends GOAWAY / closes. Returns True when everything is done.
    def run_connection(self, deadline):
        try:
            raw = socket.create_connection((self.args.host, self.args.port), timeout=10)
            sock = self.context.wrap_socket(raw, server_hostname=self.args.server_name)
        except (OSError, ssl.SSLError) as e:
            raise ConnectFailed("cannot connect to %s:%d: %s" % (self.args.host, self.args.port, e))
        if sock.selected_alpn_protocol() != "h2":
            sock.close()
            raise ConnectFailed("the server did not select ALPN h2 (got %r)" % sock.selected_alpn_protocol())
        self.connections += 1
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        # Answers are small, but thousands of 4xx bodies add up: a wide connection window.
        conn.increment_flow_control_window(1 << 24)
        sock.sendall(conn.data_to_send())

        in_flight = {}  # stream id -> Request
        unsent_body = {}  # stream id -> bytes still to send (flow control)
        got_settings = False
        goaway_last = None
        closed = False
        sock.settimeout(1.0)

        def open_streams():
            if not got_settings or goaway_last is not None:
                return
            room = min(self.limit, self.args.max_in_flight) - conn.open_outbound_streams
            while room > 0 and self.queue:
                r = self.queue.pop(0)
                sid = conn.get_next_available_stream_id()
                headers = [
                    (":method", "POST"),
                    (":scheme", "https"),
                    (":path", "/3/device/" + r.token),
                    (":authority", self.authority),
                    ("apns-topic", self.args.topic),
                    ("apns-push-type", "alert"),
                    ("apns-priority", "10"),
                    ("apns-id", r.apns_id),
                    ("authorization", "bearer " + self.jwt),
                    ("content-length", str(len(r.body))),
                ]
                conn.send_headers(sid, headers)
                r.stream = sid
                r.sends += 1
                in_flight[sid] = r
                unsent_body[sid] = r.body
                send_bodies()
                room -= 1
            self.max_in_flight = max(self.max_in_flight, len(in_flight))
            if self.limit == 1:
                self.max_in_flight_at_limit_1 = max(self.max_in_flight_at_limit_1, len(in_flight))

        def send_bodies():
            for sid in list(unsent_body):
                data = unsent_body[sid]
                window = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                while data and window > 0:
                    chunk, data = data[:window], data[window:]
                    conn.send_data(sid, chunk, end_stream=not data)
                    window = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                if data:
                    unsent_body[sid] = data
                else:
                    del unsent_body[sid]

        def finish(sid, answered):
            r = in_flight.pop(sid, None)
            unsent_body.pop(sid, None)
            if r is None:
                return
            if answered:
                self.done.append(r)
            else:
                self.unanswered.append(r)

        def resend(sid):
            r = in_flight.pop(sid, None)
            unsent_body.pop(sid, None)
            if r is None:
                return
            r.status, r.headers, r.data = None, {}, b""
            self.queue.insert(0, r)
            self.resent += 1

        try:
            while True:
                open_streams()
                out = conn.data_to_send()
                if out:
                    sock.sendall(out)
                if not self.queue and not in_flight:
                    return True
                if goaway_last is not None and not in_flight:
                    return False
                if time.monotonic() > deadline:
                    return False
                try:
                    data = sock.recv(65536)
                except socket.timeout:
                    continue
                except (ssl.SSLError, OSError):
                    data = b""
                if not data:
                    closed = True
                    break
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RemoteSettingsChanged):
                        changed = event.changed_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
                        if not got_settings:
                            got_settings = True
                            self.limit = conn.remote_settings.max_concurrent_streams
                            self.limits.append(self.limit)
                        elif changed is not None and changed.new_value != self.limit:
                            self.limit = changed.new_value
                            self.limits.append(self.limit)
                    elif isinstance(event, h2.events.ResponseReceived):
                        r = in_flight.get(event.stream_id)
                        if r is not None:
                            r.headers = dict(event.headers)
                            r.status = int(r.headers.get(":status", "0"))
                        if event.stream_ended is not None:
                            finish(event.stream_id, True)
                    elif isinstance(event, h2.events.DataReceived):
                        r = in_flight.get(event.stream_id)
                        if r is not None:
                            r.data += event.data
                        conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                        if event.stream_ended is not None:
                            finish(event.stream_id, True)
                    elif isinstance(event, h2.events.StreamEnded):
                        r = in_flight.get(event.stream_id)
                        finish(event.stream_id, r is not None and r.status is not None)
                    elif isinstance(event, h2.events.StreamReset):
                        r = in_flight.get(event.stream_id)
                        if r is not None and event.error_code == h2.errors.ErrorCodes.REFUSED_STREAM and r.sends <= self.args.reconnects:
                            resend(event.stream_id)
                        else:
                            finish(event.stream_id, False)
                    elif isinstance(event, h2.events.WindowUpdated):
                        send_bodies()
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        self.goaways += 1
                        goaway_last = event.last_stream_id
                        # Above the last stream id: never processed, safe to send again.
                        for sid in sorted(s for s in in_flight if s > goaway_last):
                            resend(sid)
                out = conn.data_to_send()
                if out:
                    sock.sendall(out)
        except h2.exceptions.ProtocolError as e:
            print("h2_client.py: HTTP/2 protocol error: %s" % e, file=sys.stderr)
            closed = True
        finally:
            if closed or goaway_last is not None:
                # Streams the connection took down with it: processed or not, nobody knows.
                for sid in list(in_flight):
                    if goaway_last is not None and sid > goaway_last:
                        resend(sid)
                    else:
                        finish(sid, False)
            else:
                try:
                    conn.close_connection()
                    sock.sendall(conn.data_to_send())
                except (OSError, h2.exceptions.ProtocolError):
                    pass
            try:
                sock.close()
            except OSError:
                pass
        return not self.queue and not in_flight

    def run(self, requests):
        self.queue = list(requests)
        deadline = time.monotonic() + self.args.timeout
        attempts = 0
        while self.queue and time.monotonic() < deadline:
            if attempts > self.args.reconnects:
                break
            attempts += 1
            if self.run_connection(deadline):
                break
        # What never went out (no connection left to try) counts as unanswered.
        self.unanswered.extend(self.queue)
        self.queue = []


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--server-name", default="localhost")
    p.add_argument("--ca", required=True, help="CA file the server's certificate must chain to")
    p.add_argument("--key-file", required=True, help="the provider token key (.p8, PKCS#8 PEM)")
    p.add_argument("--key-id", required=True)
    p.add_argument("--team-id", required=True)
    p.add_argument("--topic", default="com.example.app")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--token-at", action="append", default=[], metavar="I:HEX",
                   help="request I (1-based) goes to token HEX (repeatable)")
    p.add_argument("--max-in-flight", type=int, default=1000, help="our own cap on open streams")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds for the whole run")
    p.add_argument("--reconnects", type=int, default=3)
    args = p.parse_args()

    special = {}
    for item in args.token_at:
        i, _, hex_token = item.partition(":")
        special[int(i)] = hex_token.lower()
    requests = [Request(i, special.get(i, token_for(i))) for i in range(1, args.count + 1)]

    jwt = provider_token(args.key_file, args.key_id, args.team_id)
    client = Client(args, jwt)
    started = time.monotonic()
    try:
        client.run(requests)
    except ConnectFailed as e:
        print("h2_client.py: %s" % e, file=sys.stderr)
        sys.exit(2)
    seconds = time.monotonic() - started

    statuses, reasons, errors = {}, {}, []
    echoed = missing = mismatched = 0
    for r in sorted(client.done, key=lambda r: r.index):
        statuses[str(r.status)] = statuses.get(str(r.status), 0) + 1
        answer_id = r.headers.get("apns-id")
        if answer_id is None:
            missing += 1
        elif answer_id.lower() == r.apns_id.lower():
            echoed += 1
        else:
            mismatched += 1
        if r.status != 200:
            reason, timestamp = None, None
            try:
                body = json.loads(r.data.decode("utf-8")) if r.data else {}
                reason, timestamp = body.get("reason"), body.get("timestamp")
            except (ValueError, UnicodeDecodeError, AttributeError):
                reason = r.data[:200].decode("utf-8", "replace")
            if reason is not None:
                reasons[reason] = reasons.get(reason, 0) + 1
            errors.append({"index": r.index, "token": r.token, "status": r.status, "reason": reason,
                           "timestamp": timestamp, "apns_id": r.apns_id, "echoed": answer_id})
    print(json.dumps({
        "sent": len(requests),
        "answered": len(client.done),
        "unanswered": len(client.unanswered),
        "statuses": statuses,
        "reasons": reasons,
        "apns_ids": {"echoed": echoed, "missing": missing, "mismatched": mismatched},
        "errors": errors,
        "limits": client.limits,
        "limit_rose": len(client.limits) > 1 and max(client.limits) > client.limits[0],
        "max_in_flight": client.max_in_flight,
        "max_in_flight_at_limit_1": client.max_in_flight_at_limit_1,
        "connections": client.connections,
        "goaways": client.goaways,
        "resent": client.resent,
        "seconds": round(seconds, 3),
    }, separators=(",", ":")))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
