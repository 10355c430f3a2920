#!/usr/bin/env python3
"""Broadcast pushes and channel management (APNs, iOS 18 Live Activities)
from a client built on the PyPI packages `h2` (HTTP/2 frames) and
`cryptography` (its own ES256 provider token), over Python's `ssl` and
`socket`. It shares no code with Herald: Herald's tests run it against
`herald simulate --http2`, which serves pushes, broadcasts and channel
management on one port.

    h2_channels_client.py --port P --ca ca.pem --key-file key.p8
        --key-id KEY1234567 --team-id TEAM123456 [--count 50]
        [--host 127.0.0.1] [--server-name localhost]
        [--bundle-id com.example.app] [--timeout 60]

On one connection (TLS verified against --ca for --server-name, ALPN h2,
`authorization: bearer <JWT>` on every request, a fresh UUID in
`apns-request-id` on every request), in this order:

  1. POST /1/apps/<bundle>/channels {"message-storage-policy":0,...}   -> 201, id1
  2. POST the same with policy 1                                      -> 201, id2
  3. GET /1/apps/<bundle>/all-channels                                -> 200 [id1, id2]
  4. GET /1/apps/<bundle>/channels with apns-channel-id id2 (and id1) -> 200 policy 1 (0)
  5. channel management mistakes: a bad body (400 BadRequestParams), a read
     without apns-channel-id (400 MissingChannelId), a read of an id that is
     not base64 (400 BadChannelId), another app's bundle id (403 TopicMismatch)
  6. --count broadcasts POST /4/broadcasts/apps/<bundle> to id1       -> 200 each
     (several streams at once, up to the server's MAX_CONCURRENT_STREAMS)
  7. a broadcast to AAAAAAAAAAAAAAAAAAAAAA== (well formed, unknown)   -> 400 ChannelNotRegistered
  8. a broadcast without apns-channel-id                              -> 400 MissingChannelId
  9. broadcasts that must be refused and not delivered: another app's
     bundle id (403 TopicMismatch), apns-push-type alert
     (400 InvalidPushType), a 5121-byte payload (413 PayloadTooLarge)
 10. DELETE /1/apps/<bundle>/channels id1                             -> 204
 11. a broadcast to id1                                               -> 400 ChannelNotRegistered
 12. GET channels id1                                                 -> 404 ChannelNotRegistered
 13. GET all-channels                                                 -> 200 [id2]

So the server delivers exactly --count broadcasts, and id2 is the one channel
left. Prints one JSON line (keys in the order above):

    {"created":[id1,id2],"create_statuses":[201,201],"listed":[id1,id2],
     "read":{"status":200,"channel":id2,"message-storage-policy":1,"push-type":"LiveActivity"},
     "read_first":{"status":200,"channel":id1,"message-storage-policy":0,...},
     "bad_body":[400,"BadRequestParams"],"read_missing_id":[400,"MissingChannelId"],
     "read_bad_id":[400,"BadChannelId"],"other_app_channels":[403,"TopicMismatch"],
     "broadcasts":K,"broadcast_statuses":{"200":K},"broadcast_reasons":{},
     "unknown":"ChannelNotRegistered","unknown_status":400,
     "missing":"MissingChannelId","missing_status":400,
     "other_app":[403,"TopicMismatch"],"wrong_push_type":[400,"InvalidPushType"],
     "too_large":[413,"PayloadTooLarge"],
     "deleted":204,"after_delete":"ChannelNotRegistered","after_delete_status":400,
     "read_after_delete":[404,"ChannelNotRegistered"],"listed_after_delete":[id2],
     "requests":N,"request_ids_echoed":true,"request_ids":{"echoed":N,"missing":0,"mismatched":0},
     "answers_with_apns_id":0,"limits":[1,1000],"max_in_flight":n,
     "connections":1,"seconds":t}

`request_ids_echoed` is true when every answer carried the request's own
`apns-request-id` back; `answers_with_apns_id` counts answers that carried an
`apns-id` header (a device push's, which broadcasts and channel management do
not use). A reason is null when the answer had no JSON body with one.

Exit status 0 once the line is printed, whatever the answers were; 2 with one
line on stderr and no JSON when the connection, the TLS handshake or ALPN h2
fails; 1 with one line on stderr when the connection is lost or the server
stops answering (--timeout) before the run is over.
"""

import argparse
import json
import socket
import ssl
import sys
import time
import uuid

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
# The ES256 provider token, as the sibling h2 client signs it (this directory is on sys.path when run as a script).
from h2_client import provider_token

PROG = "h2_channels_client.py"
UNKNOWN_CHANNEL = "AAAAAAAAAAAAAAAAAAAAAA=="


class ConnectFailed(Exception):
    """No connection, no TLS, or no ALPN h2: exit 2."""


class RunFailed(Exception):
    """The connection broke or went quiet in the middle of the run: exit 1."""


class Call:
    """One request and, once it came, its answer."""

    def __init__(self, method, path, headers=(), body=b""):
        self.method = method
        self.path = path
        self.request_id = str(uuid.uuid4())
        self.headers = list(headers)
        self.body = body
        self.status = None
        self.answer_headers = {}
        self.data = b""
        self.done = False

    def json(self):
        try:
            value = json.loads(self.data.decode("utf-8")) if self.data else None
        except (ValueError, UnicodeDecodeError):
            return None
        return value if isinstance(value, dict) else None

    @property
    def reason(self):
        body = self.json()
        return body.get("reason") if body else None

    def outcome(self):
        return [self.status, self.reason]


class Session:
    """One HTTP/2 connection; `exchange` runs calls, several streams at once."""

    def __init__(self, args, jwt):
        self.args = args
        self.jwt = jwt
        self.limits = []
        self.limit = None
        self.max_in_flight = 0
        self.calls = []
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=args.ca)
        context.set_alpn_protocols(["h2"])
        try:
            raw = socket.create_connection((args.host, args.port), timeout=10)
        except OSError as e:
            raise ConnectFailed("cannot connect to %s:%d: %s" % (args.host, args.port, e))
        try:
            self.sock = context.wrap_socket(raw, server_hostname=args.server_name)
        except (OSError, ssl.SSLError) as e:
            raw.close()
            raise ConnectFailed("TLS handshake with %s:%d failed: %s" % (args.host, args.port, e))
        alpn = self.sock.selected_alpn_protocol()
        if alpn != "h2":
            self.sock.close()
            raise ConnectFailed("the server did not select ALPN h2 (got %r)" % alpn)
        self.sock.settimeout(0.5)
        self.conn = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.got_settings = False
        self.in_flight = {}  # stream id -> Call
        self.unsent = {}  # stream id -> body bytes not sent yet (flow control)

    def close(self):
        try:
            self.conn.close_connection()
            self.sock.sendall(self.conn.data_to_send())
        except (OSError, h2.exceptions.ProtocolError):
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def _start(self, call):
        sid = self.conn.get_next_available_stream_id()
        headers = [
            (":method", call.method),
            (":scheme", "https"),
            (":path", call.path),
            (":authority", self.args.server_name),
            ("authorization", "bearer " + self.jwt),
            ("apns-request-id", call.request_id),
        ] + call.headers
        if call.body:
            headers.append(("content-length", str(len(call.body))))
        self.conn.send_headers(sid, headers, end_stream=not call.body)
        self.in_flight[sid] = call
        if call.body:
            self.unsent[sid] = call.body
        self._send_bodies()

    def _send_bodies(self):
        for sid in list(self.unsent):
            data = self.unsent[sid]
            room = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
            while data and room > 0:
                chunk, data = data[:room], data[room:]
                self.conn.send_data(sid, chunk, end_stream=not data)
                room = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
            if data:
                self.unsent[sid] = data
            else:
                del self.unsent[sid]

    def _finish(self, sid):
        call = self.in_flight.pop(sid, None)
        self.unsent.pop(sid, None)
        if call is not None:
            call.done = True

    def exchange(self, *calls):
        """Sends `calls` (at most the server's stream limit at once) and waits for every answer."""
        queue = list(calls)
        self.calls.extend(calls)
        deadline = time.monotonic() + self.args.timeout
        while queue or self.in_flight:
            if self.got_settings:
                while queue and self.conn.open_outbound_streams < self.limit:
                    self._start(queue.pop(0))
                self.max_in_flight = max(self.max_in_flight, len(self.in_flight))
            out = self.conn.data_to_send()
            if out:
                self.sock.sendall(out)
            if not queue and not self.in_flight:
                break
            if time.monotonic() > deadline:
                raise RunFailed("no answer within %g s (%d waiting, %d in flight)"
                                % (self.args.timeout, len(queue), len(self.in_flight)))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except (ssl.SSLError, OSError) as e:
                raise RunFailed("connection lost: %s" % e)
            if not data:
                raise RunFailed("the server closed the connection (%d answers outstanding)"
                                % (len(queue) + len(self.in_flight)))
            try:
                events = self.conn.receive_data(data)
            except h2.exceptions.ProtocolError as e:
                raise RunFailed("HTTP/2 protocol error: %s" % e)
            for event in events:
                self._event(event)
        return list(calls)

    def one(self, call):
        return self.exchange(call)[0]

    def _event(self, event):
        if isinstance(event, h2.events.RemoteSettingsChanged):
            limit = self.conn.remote_settings.max_concurrent_streams
            if not self.got_settings or limit != self.limit:
                self.limits.append(limit)
            self.got_settings = True
            self.limit = limit
        elif isinstance(event, h2.events.ResponseReceived):
            call = self.in_flight.get(event.stream_id)
            if call is not None:
                call.answer_headers = dict(event.headers)
                try:
                    call.status = int(call.answer_headers.get(":status", "0"))
                except ValueError:
                    call.status = 0
            if event.stream_ended is not None:
                self._finish(event.stream_id)
        elif isinstance(event, h2.events.DataReceived):
            call = self.in_flight.get(event.stream_id)
            if call is not None:
                call.data += event.data
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if event.stream_ended is not None:
                self._finish(event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            self._finish(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            call = self.in_flight.get(event.stream_id)
            raise RunFailed("the server reset stream %d (%s %s): error %s"
                            % (event.stream_id, call.method if call else "?", call.path if call else "?", event.error_code))
        elif isinstance(event, h2.events.WindowUpdated):
            self._send_bodies()
        elif isinstance(event, h2.events.ConnectionTerminated):
            body = (event.additional_data or b"").decode("utf-8", "replace")
            raise RunFailed("the server sent GOAWAY (error %s, last stream %s) %s"
                            % (event.error_code, event.last_stream_id, body))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--server-name", default="localhost")
    p.add_argument("--ca", required=True, help="CA file the server's certificate must chain to")
    p.add_argument("--key-file", required=True, help="the provider token key (.p8, PKCS#8 PEM)")
    p.add_argument("--key-id", required=True)
    p.add_argument("--team-id", required=True)
    p.add_argument("--bundle-id", default="com.example.app")
    p.add_argument("--count", type=int, default=50, help="broadcasts to the first channel")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each batch of answers")
    args = p.parse_args()

    bundle = args.bundle_id
    other_bundle = bundle + ".other"
    channels = "/1/apps/%s/channels" % bundle
    all_channels = "/1/apps/%s/all-channels" % bundle
    broadcast_path = "/4/broadcasts/apps/%s" % bundle

    def create(policy, bundle_path=channels, body=None):
        if body is None:
            body = json.dumps({"message-storage-policy": policy, "push-type": "LiveActivity"},
                              separators=(",", ":")).encode()
        return Call("POST", bundle_path, [("content-type", "application/json")], body)

    def read(channel_id, path=channels):
        return Call("GET", path, [("apns-channel-id", channel_id)] if channel_id is not None else [])

    def live_activity(i, pad=0):
        aps = {"event": "update", "content-state": {"score": i, "note": "x" * pad}, "timestamp": int(time.time())}
        return json.dumps({"aps": aps}, separators=(",", ":")).encode()

    def broadcast(channel_id, i=0, path=broadcast_path, push_type="liveactivity", body=None):
        headers = [("apns-push-type", push_type), ("apns-expiration", "0"), ("apns-priority", "10")]
        if channel_id is not None:
            headers.insert(0, ("apns-channel-id", channel_id))
        return Call("POST", path, headers, body if body is not None else live_activity(i))

    def oversized():
        base = len(live_activity(0))
        body = live_activity(0, pad=5121 - base)
        assert len(body) == 5121, len(body)
        return body

    def channel_info(call, channel_id):
        body = call.json() or {}
        return {"status": call.status, "channel": channel_id,
                "message-storage-policy": body.get("message-storage-policy"), "push-type": body.get("push-type")}

    def listed(call):
        body = call.json() or {}
        ids = body.get("channels")
        return ids if isinstance(ids, list) else None

    jwt = provider_token(args.key_file, args.key_id, args.team_id)
    started = time.monotonic()
    try:
        session = Session(args, jwt)
    except ConnectFailed as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        sys.exit(2)

    report = {}
    try:
        c1 = session.one(create(0))
        c2 = session.one(create(1))
        id1 = c1.answer_headers.get("apns-channel-id")
        id2 = c2.answer_headers.get("apns-channel-id")
        report["created"] = [id1, id2]
        report["create_statuses"] = [c1.status, c2.status]
        report["listed"] = listed(session.one(Call("GET", all_channels)))
        report["read"] = channel_info(session.one(read(id2 or "")), id2)
        report["read_first"] = channel_info(session.one(read(id1 or "")), id1)
        report["bad_body"] = session.one(
            create(0, body=b'{"message-storage-policy":7,"push-type":"LiveActivity"}')).outcome()
        report["read_missing_id"] = session.one(read(None)).outcome()
        report["read_bad_id"] = session.one(read("not base64!")).outcome()
        report["other_app_channels"] = session.one(create(0, bundle_path="/1/apps/%s/channels" % other_bundle)).outcome()

        pushes = session.exchange(*[broadcast(id1 or "", i) for i in range(1, args.count + 1)])
        statuses, reasons = {}, {}
        for call in pushes:
            statuses[str(call.status)] = statuses.get(str(call.status), 0) + 1
            if call.reason is not None:
                reasons[call.reason] = reasons.get(call.reason, 0) + 1
        report["broadcasts"] = len(pushes)
        report["broadcast_statuses"] = statuses
        report["broadcast_reasons"] = reasons

        unknown = session.one(broadcast(UNKNOWN_CHANNEL))
        report["unknown"], report["unknown_status"] = unknown.reason, unknown.status
        missing = session.one(broadcast(None))
        report["missing"], report["missing_status"] = missing.reason, missing.status
        report["other_app"] = session.one(broadcast(id1 or "", path="/4/broadcasts/apps/%s" % other_bundle)).outcome()
        report["wrong_push_type"] = session.one(broadcast(id1 or "", push_type="alert")).outcome()
        report["too_large"] = session.one(broadcast(id1 or "", body=oversized())).outcome()

        report["deleted"] = session.one(Call("DELETE", channels, [("apns-channel-id", id1 or "")])).status
        after = session.one(broadcast(id1 or ""))
        report["after_delete"], report["after_delete_status"] = after.reason, after.status
        report["read_after_delete"] = session.one(read(id1 or "")).outcome()
        report["listed_after_delete"] = listed(session.one(Call("GET", all_channels)))
    except RunFailed as e:
        session.close()
        print("%s: %s" % (PROG, e), file=sys.stderr)
        sys.exit(1)
    session.close()

    echoed = missing_ids = mismatched = with_apns_id = 0
    for call in session.calls:
        answer = call.answer_headers.get("apns-request-id")
        if answer is None:
            missing_ids += 1
        elif answer.lower() == call.request_id.lower():
            echoed += 1
        else:
            mismatched += 1
        if "apns-id" in call.answer_headers:
            with_apns_id += 1
    report["requests"] = len(session.calls)
    report["request_ids_echoed"] = echoed == len(session.calls)
    report["request_ids"] = {"echoed": echoed, "missing": missing_ids, "mismatched": mismatched}
    report["answers_with_apns_id"] = with_apns_id
    report["limits"] = session.limits
    report["max_in_flight"] = session.max_in_flight
    report["connections"] = 1
    report["seconds"] = round(time.monotonic() - started, 3)
    print(json.dumps(report, separators=(",", ":")))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
