#!/usr/bin/env python3
"""A receiver for `herald serve`'s outcome webhook, written with the standard
library's `http.server` only; it shares no code with Herald.

    webhook_receiver.py --token T --out FILE [--plan 503,drop,500] [--tls-cert C --tls-key K]

Listens on 127.0.0.1 (a free port), over TLS with Python's `ssl` when given a
certificate, and prints {"port": P} once listening.
Every POST must carry `Authorization: Bearer T` (else 401) and a JSON body
{"batch": id, "outcomes": [...]}. The first requests follow --plan, one
entry each: a status number is answered with that status (and
`Retry-After: 0` for 429 and 503); `drop` reads the whole request, then
closes the connection without answering (an answer lost on the way back).
Every later request is answered 200. Each request is appended to FILE as
one JSON line: {"batch", "key" (Idempotency-Key), "answer" (status or
"drop"), "outcomes"}.

Runs until its standard input closes or SIGINT, then prints one JSON line:
{"requests": n, "unauthorized": n, "malformed": n}.
"""

import argparse
import http.server
import json
import signal
import sys
import threading


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--token", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--plan", default="")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    args = p.parse_args()
    plan = [x for x in args.plan.split(",") if x]
    lock = threading.Lock()
    counts = {"requests": 0, "unauthorized": 0, "malformed": 0}
    out = open(args.out, "a")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def answer(self, status, body=b"{}", extra=None):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with lock:
                counts["requests"] += 1
                if self.headers.get("Authorization") != "Bearer " + args.token:
                    counts["unauthorized"] += 1
                    self.answer(401)
                    return
                try:
                    doc = json.loads(body)
                    batch, outcomes = doc["batch"], doc["outcomes"]
                except Exception:
                    counts["malformed"] += 1
                    self.answer(400)
                    return
                step = plan.pop(0) if plan else "200"
                out.write(json.dumps({"batch": batch, "key": self.headers.get("Idempotency-Key"),
                                      "answer": step if step == "drop" else int(step), "outcomes": outcomes}) + "\n")
                out.flush()
            if step == "drop":
                self.close_connection = True
                self.connection.shutdown(2)
                return
            status = int(step)
            self.answer(status, extra={"Retry-After": "0"} if status in (429, 503) else None)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if args.tls_cert:
        import ssl
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"port": server.server_address[1]}), flush=True)

    done = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: done.set())
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    done.wait()
    server.shutdown()
    with lock:
        out.close()
        print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main()
