#!/usr/bin/env bash
# Builds the libFuzzer targets (address sanitizer on) and runs each for SECONDS
# (default 30). CI calls `Fuzz/run.sh 20`; a long run is `Fuzz/run.sh 3600`; `Fuzz/run.sh 0`
# only builds them.
# Corpora grow in fuzz-out/corpus/<target>; crashes land in fuzz-out/crashes/.
set -euo pipefail
seconds="${1:-30}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$root/fuzz-out"
mkdir -p "$out/crashes"
cd "$here"
swift build -c release --sanitize=fuzzer --sanitize=address 2>&1 | tail -n 3
bin="$(swift build -c release --sanitize=fuzzer --sanitize=address --show-bin-path)"
if [ "$seconds" = 0 ]; then exit 0; fi
status=0
for target in FuzzNotificationDecoder FuzzErrorResponseDecoder FuzzFeedbackDecoder FuzzGateway; do
  corpus="$out/corpus/$target"
  mkdir -p "$corpus"
  # Seeds: valid messages of each kind, so the fuzzer starts from the grammar.
  if [ -d "$here/seeds/$target" ]; then cp -n "$here/seeds/$target"/* "$corpus"/ 2>/dev/null || true; fi
  echo "fuzz: $target for ${seconds}s"
  if ! "$bin/$target" "$corpus" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=1024 \
        -artifact_prefix="$out/crashes/$target-" -print_final_stats=1 2>"$out/$target.log"; then
    echo "fuzz: $target FAILED; see $out/$target.log and $out/crashes/" >&2
    tail -n 30 "$out/$target.log" >&2
    status=1
  else
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$out/$target.log" | sed "s/^/  /"
  fi
done
exit "$status"
