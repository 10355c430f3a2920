"""An OTLP/HTTP trace receiver for herald's tracing tests (issue 31).

Listens on 127.0.0.1 (port 0: a free one, printed as {"port": N} on stdout),
takes POST /v1/traces bodies as OpenTelemetry's collectors do (protobuf,
application/x-protobuf, decoded with opentelemetry-proto's own messages; or
JSON, application/json) and appends one JSON object per span to the file
given as the first argument:

  {"trace_id", "span_id", "parent_span_id" (hex, "" for none), "name", "kind",
   "start", "end" (ns since the epoch), "attributes" {key: value},
   "status" (0 unset, 1 ok, 2 error), "status_message", "service",
   "scope" (the instrumentation scope's name)}

It answers 200 with an ExportTraceServiceResponse; anything else is 404 / 415.
A collector's failures, when asked: `--fail-first N` answers the first N
exports 503 (their spans not kept), `--stall S` waits S seconds before
answering each of the first exports while it fails or, without failures,
the first one. Ends on SIGTERM or when stdin closes.
"""
import argparse
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

ARGS = argparse.ArgumentParser()
ARGS.add_argument("out")
ARGS.add_argument("--fail-first", type=int, default=0)
ARGS.add_argument("--stall", type=float, default=0)
ARGS = ARGS.parse_args()
OUT = ARGS.out
LOCK = threading.Lock()
EXPORTS = [0]


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    v = getattr(any_value, kind)
    if kind == "array_value":
        return [value_of(x) for x in v.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.values}
    if kind == "bytes_value":
        return v.hex()
    return v


def spans_of(request):
    for resource_spans in request.resource_spans:
        service = ""
        for kv in resource_spans.resource.attributes:
            if kv.key == "service.name":
                service = value_of(kv.value)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                yield {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": span.kind,
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "attributes": {kv.key: value_of(kv.value) for kv in span.attributes},
                    "status": span.status.code,
                    "status_message": span.status.message,
                    "service": service,
                    "scope": scope,
                }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.path != "/v1/traces":
            return self.answer(404, b"", "text/plain")
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        request = trace_service_pb2.ExportTraceServiceRequest()
        try:
            if content_type == "application/x-protobuf":
                request.ParseFromString(body)
            elif content_type == "application/json":
                json_format.Parse(body, request)
            else:
                return self.answer(415, b"", "text/plain")
        except Exception as e:  # a body that is not OTLP: the test fails on the 400
            sys.stderr.write(f"otlp_receiver: undecodable body: {e}\n")
            return self.answer(400, b"", "text/plain")
        with LOCK:
            EXPORTS[0] += 1
            number = EXPORTS[0]
        if ARGS.stall and number <= max(1, ARGS.fail_first):
            time.sleep(ARGS.stall)
        if number <= ARGS.fail_first:
            return self.answer(503, b"", "text/plain")
        lines = [json.dumps(s) + "\n" for s in spans_of(request)]
        with LOCK, open(OUT, "a") as f:
            f.writelines(lines)
        response = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.answer(200, response, "application/x-protobuf")

    def answer(self, status, body, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())

    def watch_stdin():
        sys.stdin.read()
        server.shutdown()

    threading.Thread(target=watch_stdin, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
