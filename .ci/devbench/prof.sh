#!/usr/bin/env bash
# Beside hb.tar.xz and perf.tar.xz (see run.sh's header): herald send timed in variants, then perf-recorded.
# Profiles herald send on this machine's cores: perf (cpu-clock, frame pointers) into $OUT, plus variants timed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
W=/tmp/devbench; rm -rf "$W"; mkdir -p "$W"
tar -C "$W" -xJf "$here/hb.tar.xz"; tar -C "$W" -xJf "$here/perf.tar.xz"
LIB=$W/hb/lib; H=$W/hb/bin/herald
echo "nproc $(nproc)"
python3 - "$W/lines.jsonl" 1000000 <<'PY'
import json, random, sys
random.seed(11)
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(json.dumps({"id": i, "token": "%064x" % random.getrandbits(256), "topic": "com.example.app",
                            "alert": {"title": "Game Request", "body": "Bob wants to play poker %d" % i},
                            "badge": i % 10, "sound": "default", "custom": {"gameID": str(i)}}) + "\n")
PY
P() { env LD_LIBRARY_PATH="$W/perf" "$W/perf/perf" "$@"; }
S() { env LD_LIBRARY_PATH="$LIB" "$H" send "$W/lines.jsonl" --quiet "$@"; }
t() { echo "== $*" | cut -c1-160; "$@" 2>&1 | grep -o '"elapsed_s":[0-9.]*,"rate_per_s":[0-9.]*'; }
t S --outcomes "$W/o.jsonl"; rm -f "$W/o.jsonl"
t S --outcomes /dev/null
t S --outcomes /dev/null --threads 8
t S --outcomes "$W/o.jsonl" --threads 16; rm -f "$W/o.jsonl"
P record -e cpu-clock -F 997 -g -o "$OUT/send16.data" -- env LD_LIBRARY_PATH="$LIB" "$H" send "$W/lines.jsonl" --quiet --outcomes "$W/o.jsonl" 2>&1 | tail -3
rm -f "$W/o.jsonl"
P record -e cpu-clock -F 997 -g -o "$OUT/send1.data" -- env LD_LIBRARY_PATH="$LIB" taskset -c 0 "$H" send "$W/lines.jsonl" --quiet --outcomes "$W/o.jsonl" 2>&1 | tail -3
ls -la "$OUT"
