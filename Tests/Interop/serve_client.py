#!/usr/bin/env python3
"""A client of `herald serve`'s HTTP API written with the standard library's
`http.client` only (and PyPI's `prometheus_client` to parse /metrics); it
shares no code with Herald.

    serve_client.py --port P --token-file F --count N [--batch B]
        [--signal-pid PID --signal-after K] [--format jsonl|array]

Posts N requests `{"id":i,"token":<64 hex>,"topic":"com.example.app","alert":"…"}`
(i from 0) in batches of B to POST /v1/notifications with
`Authorization: Bearer <first line of F>`, on one keep-alive connection
(reconnecting when the server closes it). A 429 is retried after its
Retry-After; a 503 or a refused connection ends the run (the service is
shutting down): that batch and the ones after it are "refused". With
--signal-pid, SIGTERM is sent to PID after K batches were accepted.

Before posting it checks: /healthz and /readyz answer 200 without a token,
POST without a token is 401, a malformed body is 400 with a reason, a body
over the limit is 413, and the service still answers /healthz after them.
At the end (unless the service was signalled) it reads /metrics, parses it
with prometheus_client's text parser, and reports the outcome counters.

Prints one JSON line:

    {"accepted": n, "refused": n, "ids": {"<caller id>": notification number, ...},
     "statuses": {"202": n, "429": n, ...}, "checks": {...}, "metrics": {...}}
"""

import argparse
import http.client
import json
import os
import signal
import sys
import time


def request(conn_box, args, method, path, body=None, token=True, headers=None):
    for attempt in range(3):
        conn = conn_box[0]
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
            conn_box[0] = conn
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + args.token
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn_box[0] = None
            return r.status, data, r
        except (ConnectionError, http.client.HTTPException, OSError):
            conn.close()
            conn_box[0] = None
            if attempt == 2:
                raise
            time.sleep(0.05)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--token-file", required=True)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--signal-pid", type=int)
    p.add_argument("--signal-after", type=int, default=10)
    p.add_argument("--format", choices=["jsonl", "array"], default="jsonl")
    args = p.parse_args()
    with open(args.token_file) as f:
        args.token = f.readline().strip()

    box = [None]
    checks = {}
    s, _, _ = request(box, args, "GET", "/healthz", token=False)
    checks["healthz"] = s
    s, _, _ = request(box, args, "GET", "/readyz", token=False)
    checks["readyz"] = s
    s, _, r = request(box, args, "POST", "/v1/notifications", body=b"{}", token=False)
    checks["no_token"] = s
    checks["www_authenticate"] = r.getheader("WWW-Authenticate")
    s, _, _ = request(box, args, "POST", "/v1/notifications", body=b"{}", headers={"Authorization": "Bearer wrong-token-of-some-length"}, token=False)
    checks["wrong_token"] = s
    s, data, _ = request(box, args, "POST", "/v1/notifications", body=b'{"token": [1,2', headers={"Content-Type": "application/x-ndjson"})
    checks["malformed"] = [s, json.loads(data)["results"][0].get("error", "")[:60]]
    s, data, _ = request(box, args, "POST", "/v1/notifications", body=b'{"token":"zz","alert":"x"}\n\xff\xfe\n')
    checks["bad_lines"] = [s, [x.get("error", "")[:40] for x in json.loads(data)["results"]]]
    s, _, _ = request(box, args, "POST", "/v1/notifications", body=b"x" * (10 << 20))
    checks["too_large"] = s
    s, _, _ = request(box, args, "GET", "/healthz", token=False)
    checks["healthz_after"] = s

    ids = {}
    statuses = {}
    refused = 0
    accepted_batches = 0
    signalled = False
    i = 0
    while i < args.count:
        n = min(args.batch, args.count - i)
        reqs = [{"id": k, "token": "%064x" % (k * 2654435761 + 1), "topic": "com.example.app", "alert": "game %d" % k} for k in range(i, i + n)]
        if args.format == "array":
            body = json.dumps(reqs).encode()
        else:
            body = ("\n".join(json.dumps(x) for x in reqs) + "\n").encode()
        try:
            s, data, r = request(box, args, "POST", "/v1/notifications", body=body)
        except Exception:
            s, data, r = 0, b"", None
        statuses[str(s)] = statuses.get(str(s), 0) + 1
        if s == 202:
            results = json.loads(data)["results"]
            for k, res in zip(range(i, i + n), results):
                ids[str(k)] = res["notification"]
            i += n
            accepted_batches += 1
            if args.signal_pid and not signalled and accepted_batches >= args.signal_after:
                os.kill(args.signal_pid, signal.SIGTERM)
                signalled = True
        elif s == 429:
            time.sleep(float(r.getheader("Retry-After", "1")) / 10)
        else:
            # 503 or no connection: the service is going away; the rest is refused.
            refused = args.count - i
            break

    metrics = {}
    if not signalled:
        from prometheus_client.parser import text_string_to_metric_families
        deadline = time.time() + 60
        while time.time() < deadline:
            s, data, _ = request(box, args, "GET", "/metrics")
            metrics = {}
            for family in text_string_to_metric_families(data.decode()):
                for sample in family.samples:
                    key = sample.name + "".join("{%s=%s}" % kv for kv in sorted(sample.labels.items()))
                    metrics[key] = sample.value
            decided = sum(v for k, v in metrics.items() if k.startswith("herald_outcomes_total"))
            if decided >= len(ids):
                break
            time.sleep(0.1)
        s, data, _ = request(box, args, "GET", "/v1/notifications/0")
        checks["get_first"] = [s, json.loads(data).get("state")]
        s, _, _ = request(box, args, "GET", "/v1/notifications/999999999")
        checks["get_unknown"] = s

    print(json.dumps({"accepted": len(ids), "refused": refused, "ids": ids, "statuses": statuses, "checks": checks, "metrics": metrics}))


if __name__ == "__main__":
    main()
