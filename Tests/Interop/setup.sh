#!/usr/bin/env bash
# Make (once) the Python venv the interop tests use, with the PyPI packages
# apns3 (apns3_client.py), h2 and cryptography (h2_client.py) and proxy.py
# (the HTTPS proxy of HTTP2ProxyTests), prometheus_client (serve_client.py) and
# schemathesis (herald serve against its OpenAPI document) and orjson
# (herald bench send's baseline), opentelemetry-proto (otlp_receiver.py) and Babel (CLDR's plural rules: the data
# Sources/HeraldLocalization/CLDR/generate.py reads and the evaluator
# PluralRulesBabelTests compares with) in it, and
# print the path of its python on stdout (nothing else goes to stdout).
# Idempotent and safe to run concurrently (flock).
#
#   HERALD_INTEROP_VENV   venv directory (default .build/interop-venv; a
#                         relative path is taken from the repository root)
#   HERALD_INTEROP_PYTHON python used to create it (default python3, >= 3.8)
#
# apns3 is pinned: apns3_client.py works around bugs in this exact version.
# h2 and cryptography are held to their major versions (h2_client.py uses
# h2's 4.x event API and cryptography's EC signing).
set -euo pipefail

APNS3_SPEC="apns3==1.0.0"
H2_SPECS=("h2>=4.1,<5" "cryptography>=41")
# proxy.py: the HTTPS proxy HTTP2ProxyTests tunnels through (CONNECT).
PROXY_SPEC="proxy.py>=2.4,<3"
# prometheus_client: serve_client.py parses herald serve's /metrics with its text parser.
PROMETHEUS_SPEC="prometheus_client>=0.17"
# schemathesis: checks herald serve against its OpenAPI document (its 4.x CLI: st run … --checks all).
SCHEMATHESIS_SPEC="schemathesis>=4.3,<5"
# orjson: herald bench send's baseline (parse-only of the same lines, issue 29).
ORJSON_SPEC="orjson>=3.9"
# opentelemetry-proto: the OTLP messages otlp_receiver.py decodes herald's exported spans with (TracingTests).
OTLP_PROTO_SPEC="opentelemetry-proto>=1.20,<2"
# Babel: pinned, since the generated PluralRules+CLDR.swift is checked against its CLDR data.
BABEL_SPEC="Babel==2.19.0"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${HERALD_INTEROP_VENV:-.build/interop-venv}"
case "$venv" in
    /*) ;;
    *) venv="$root/$venv" ;;
esac
python="${HERALD_INTEROP_PYTHON:-python3}"

fail() {
    echo "Tests/Interop/setup.sh: $*" >&2
    exit 1
}

# apns3 imports ssl.wrap_socket, gone since Python 3.12 (apns3_client.py
# defines a placeholder first; so does this check).
check='import ssl
if not hasattr(ssl, "wrap_socket"): ssl.wrap_socket = None
import apns3
import h2.connection, h2.config, h2.events, h2.settings
from cryptography.hazmat.primitives.asymmetric import ec
import proxy
from prometheus_client.parser import text_string_to_metric_families
import schemathesis
import orjson
import babel
assert babel.__version__ == "2.19.0"
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2'

ready() {
    [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" >/dev/null 2>&1
}

if ready; then
    echo "$venv/bin/python"
    exit 0
fi

command -v "$python" >/dev/null 2>&1 || fail "no $python on PATH (set HERALD_INTEROP_PYTHON)"
"$python" -c 'import sys; assert sys.version_info >= (3, 8)' 2>/dev/null \
    || fail "$python is older than Python 3.8"

mkdir -p "$(dirname "$venv")"
lock="$venv.lock"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$lock"
    flock -w 300 9 || fail "waited 300 s for $lock (another setup.sh running?)"
fi

if ! ready; then
    if [ ! -x "$venv/bin/python" ]; then
        rm -rf "$venv"
        "$python" -m venv "$venv" >&2 \
            || fail "'$python -m venv $venv' failed (on Debian/Ubuntu: apt-get install python3-venv)"
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$APNS3_SPEC" "${H2_SPECS[@]}" "$PROXY_SPEC" "$PROMETHEUS_SPEC" "$SCHEMATHESIS_SPEC" "$ORJSON_SPEC" "$BABEL_SPEC" "$OTLP_PROTO_SPEC" >&2 \
        || fail "'pip install $APNS3_SPEC ${H2_SPECS[*]} $PROXY_SPEC $PROMETHEUS_SPEC $SCHEMATHESIS_SPEC $ORJSON_SPEC $BABEL_SPEC $OTLP_PROTO_SPEC' into $venv failed (is PyPI reachable?)"
    ready || fail "apns3, h2, cryptography, proxy.py, prometheus_client, schemathesis, orjson, Babel $BABEL_SPEC or opentelemetry-proto does not import in $venv after installing them"
fi

echo "$venv/bin/python"
