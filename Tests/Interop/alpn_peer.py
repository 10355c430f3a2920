#!/usr/bin/env python3
"""An independent TLS peer for Herald's ALPN tests (Python's ssl, stdlib only).

    alpn_peer.py server --cert C --key K [--ca CA] [--alpn h2,http/1.1] [--port 0] [--max-seconds 120]
    alpn_peer.py client --port P --ca CA [--cert C --key K] [--alpn h2] [--server-name localhost]

server: prints {"port": P}, then for every connection records what ALPN
selected (``selected_alpn_protocol()``) or the handshake error, and echoes
what it reads until the client closes. It stops on stdin EOF (or after
--max-seconds) and prints {"connections": [{"alpn": "h2"} | {"error": "..."}, ...]}.
With --ca it requires a client certificate signed by it.

client: connects, handshakes, sends b"ping", reads the echo and prints one line
{"alpn": "h2" | null, "echo": true | false} or {"error": "..."}; exit status 0
either way (the error is the result). Loopback only.
"""

import argparse
import json
import socket
import ssl
import sys
import threading

LOOPBACK = "127.0.0.1"
TIMEOUT = 10.0


def protocols(text):
    return [p for p in text.split(",") if p] if text else []


def serve_connection(context, sock, results, lock):
    sock.settimeout(TIMEOUT)
    try:
        tls = context.wrap_socket(sock, server_side=True)
    except (ssl.SSLError, OSError) as e:
        with lock:
            results.append({"error": str(e)})
        sock.close()
        return
    with lock:
        results.append({"alpn": tls.selected_alpn_protocol()})
    try:
        while True:
            data = tls.recv(65536)
            if not data:
                break
            tls.sendall(data)
    except (ssl.SSLError, OSError):
        pass
    finally:
        tls.close()


def server(args):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    if args.ca:
        context.load_verify_locations(args.ca)
        context.verify_mode = ssl.CERT_REQUIRED
    if args.alpn:
        context.set_alpn_protocols(protocols(args.alpn))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((LOOPBACK, args.port))
    listener.listen(16)
    results, lock, workers = [], threading.Lock(), []

    def accept_loop():
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            worker = threading.Thread(target=serve_connection, args=(context, sock, results, lock), daemon=True)
            with lock:
                workers.append(worker)
            worker.start()

    threading.Thread(target=accept_loop, daemon=True).start()
    print(json.dumps({"port": listener.getsockname()[1]}), flush=True)
    # Runs while the test holds our standard input open.
    stopper = threading.Thread(target=sys.stdin.read, daemon=True)
    stopper.start()
    stopper.join(args.max_seconds)
    listener.close()
    # A connection whose client already left may still be recording its result.
    with lock:
        running = list(workers)
    for worker in running:
        worker.join(TIMEOUT)
    with lock:
        print(json.dumps({"connections": list(results)}), flush=True)


def client(args):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(args.ca)
    if args.cert:
        context.load_cert_chain(args.cert, args.key)
    if args.alpn:
        context.set_alpn_protocols(protocols(args.alpn))
    try:
        with socket.create_connection((LOOPBACK, args.port), timeout=TIMEOUT) as sock:
            with context.wrap_socket(sock, server_hostname=args.server_name) as tls:
                selected = tls.selected_alpn_protocol()
                tls.sendall(b"ping")
                echoed = b""
                while len(echoed) < 4:
                    data = tls.recv(4 - len(echoed))
                    if not data:
                        break
                    echoed += data
                result = {"alpn": selected, "echo": echoed == b"ping"}
    except (ssl.SSLError, OSError) as e:
        result = {"error": str(e)}
    print(json.dumps(result), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["server", "client"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--ca")
    parser.add_argument("--alpn", default="", help="comma-separated protocol names, most preferred first")
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--max-seconds", type=float, default=120.0)
    args = parser.parse_args()
    if args.mode == "server":
        if not (args.cert and args.key):
            parser.error("server needs --cert and --key")
        server(args)
    else:
        if not (args.port and args.ca):
            parser.error("client needs --port and --ca")
        client(args)


if __name__ == "__main__":
    main()
