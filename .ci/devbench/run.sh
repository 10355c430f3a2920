#!/usr/bin/env bash
# Herald's copy of ../shared/devbench/run.sh (stop 41), with three steps added:
#   sendT   herald send --threads N for each N in SEND_THREADS (default "4 8")
#   perf    send (and http2x8) again under perf record (cpu-clock, frame pointers) into $OUT/*.data,
#           if perf.tar.xz lies beside this script (perf and its libraries, packed on the 2-core machine:
#           mkdir perf; cp /usr/bin/perf perf/; ldd /usr/bin/perf | awk ... | xargs cp -t perf; tar cJf perf.tar.xz perf);
#           read them back here with the unstripped herald at /tmp/devbench/hb/bin/herald (same build id)
#   the queue step samples pg_stat_activity every 50 ms and writes what sessions wait on to $OUT/waits.txt
#   claimlock  the claim's lease statement alone by pgbench: the cursor row lock against an advisory lock
#   lanes, lanes_shared, lanes_serve, lanes_queue  herald bench lanes (issue 30): fast-lane p99 under a campaign of
#           LCOUNT bulk notifications (1,000 streams, 20 ms answers), through HeraldClient (lanes_shared: without the
#           fast lane's connection of its own, --no-fast-connection), herald serve's API and the PostgreSQL queue (LWORKERS herald work
#           processes); each with its own time limit T_LANES
# One run, on a many-core x86-64 Linux machine with no Swift toolchain, no PostgreSQL and no network,
# of what the project's 2-core machine cannot show, most important first:
#   queue     herald bench queue, 1, 2, 4 and 8 workers, on a throwaway PostgreSQL 15 (herald send beside it)
#   tls       herald bench tls --invalid-fraction 0.01 (TLS 1.3)
#   pipeline  herald bench pipeline
#   send      herald send on 1,000,000 generated request lines (outcomes to a file)
#   http2     herald bench http2 --url ... --h2load against a local nginx (HTTP/2, TLS)
# and then, each only if it fits before END_BY (235 s into the run):
#   queue_p4  bench queue again with 4 producers (1, 4 and 8 workers, 3 rounds, no pgbench): whether
#             two producers held 8 workers back (see workers_8_rounds_enqueue_share in the first)
#   tls8      bench tls --invalid-fraction 0.01 over 8 connections instead of 4
# Everything comes from hb.tar.xz beside this script (pack.sh makes it). Run as root:
#   bash devbench/run.sh
# Environment:
#   OUT         folder for results.jsonl (one JSON object a line: the machine, the setup, each step)
#               and devbench.log; default: out/ beside this script
#   SCALE       full (default) or small (small counts: a quick check of the bundle on a slow machine)
#   ONLY        a subset of: queue claimlock tls pipeline send1 send sendT perf http2 http2x8 lanes lanes_shared lanes_serve
#               lanes_queue queue_p4 tls8 (default: queue tls pipeline send1 send sendT perf http2 http2x8 queue_p4 tls8, in that order)
#   WORK        scratch folder, emptied first (default /tmp/devbench; /var/tmp/devbench if /tmp is noexec)
#   PG_DURABLE  1: PostgreSQL with its default durability; otherwise fsync, synchronous_commit and
#               full_page_writes off, as the project's test cluster runs it
#   QWORKERS, QPRODUCERS, QCOUNT, QROUNDS: bench queue's --workers, --producers, --count, --rounds
#   LCOUNT, LWORKERS, T_LANES: bench lanes' --count (default 1,000,000; small: 50,000), --workers (1), step limit (150 s)
#   FORCE_WRAP  1: start every bundled program through the bundled glibc's loader (done anyway when
#               this machine's glibc is older than the bundle needs)
set -u
export PATH="$PATH:/usr/sbin:/sbin"   # useradd, runuser
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$here/out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
W=${WORK:-/tmp/devbench}
if [ -z "${WORK:-}" ] && findmnt -no OPTIONS --target /tmp 2>/dev/null | grep -qw noexec; then W=/var/tmp/devbench; fi
SCALE=${SCALE:-full}
ONLY=${ONLY:-queue tls pipeline send1 send sendT perf http2 http2x8 queue_p4 tls8}
RES=$OUT/results.jsonl; LOG=$OUT/devbench.log
: >"$RES"; : >"$LOG"
log() { printf '[%3ds] %s\n' "$SECONDS" "$*" | tee -a "$LOG"; }
want() { case " $ONLY " in *" $1 "*) return 0;; *) return 1;; esac; }

case $SCALE in
  small) : "${QCOUNT:=20000}" "${QROUNDS:=1}" "${LCOUNT:=50000}"; TCOUNT=100000; PCOUNT=1000000; PROUNDS=1; LINES=100000; HCOUNT=20000 ;;
  *)     : "${QCOUNT:=200000}" "${QROUNDS:=5}" "${LCOUNT:=1000000}"; TCOUNT=1000000; PCOUNT=10000000; PROUNDS=5; LINES=1000000; HCOUNT=200000 ;;
esac
QWORKERS=${QWORKERS:-1,2,4,8}; QPRODUCERS=${QPRODUCERS:-2}
# Time limits per step (seconds): the whole run stays near 4 minutes even when a step hangs.
T_QUEUE=${T_QUEUE:-110}; T_LANES=${T_LANES:-150}; T_TLS=${T_TLS:-55}; T_PIPELINE=${T_PIPELINE:-45}; T_SEND=${T_SEND:-25}; T_HTTP2=${T_HTTP2:-35}
# The optional steps start only while they fit before END_BY seconds into the run.
END_BY=${END_BY:-235}

log "devbench: scale $SCALE, steps: $ONLY, results in $OUT"
{
  echo "== nproc: $(nproc)"; echo "== uname -a: $(uname -a)"
  echo "== /etc/os-release:"; cat /etc/os-release 2>/dev/null
  echo "== lscpu model name: $(lscpu 2>/dev/null | grep -m1 'Model name' | sed 's/.*: *//')"
  echo "== glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null)"
  echo "== cgroup cpu.max: $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo none)"
  echo "== memory:"; free -m 2>/dev/null | head -2
  echo "== df:"; df -h /tmp /dev/shm 2>/dev/null
} 2>&1 | tee -a "$LOG"

# ---- unpack ------------------------------------------------------------------------------------
[ -f "$here/hb.tar.xz" ] || { log "no hb.tar.xz beside run.sh"; exit 1; }
rm -rf "$W"; mkdir -p "$W"; chmod 755 "$W"
# tar with xz; without xz, Python's tarfile.
{ command -v xz >/dev/null 2>&1 && tar -C "$W" -xJf "$here/hb.tar.xz" 2>>"$LOG"; } || { rm -rf "$W/hb";
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' "$here/hb.tar.xz" "$W"; } \
  || { log "unpacking failed"; exit 1; }
HB=$W/hb; LIB=$HB/lib; PGB=$HB/pg$(cat "$HB/PGBINDIR"); GL=$HB/glibc
cat "$HB/BUILD" | tee -a "$LOG"
log "unpacked"

# The bundle's libraries need this glibc at least (its loader and libc are in hb/glibc for older ones).
need=$(sed -n 's/^glibc needed: GLIBC_//p' "$HB/BUILD"); have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
older() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ] && [ "$1" != "$2" ]; }
WRAP=${FORCE_WRAP:-0}
if [ -z "$have" ] || older "$have" "$need"; then WRAP=1; fi
if [ "$WRAP" = 1 ]; then
  # Each bundled program becomes a script that starts it with the bundled glibc; those programs
  # start one another by name (initdb and pg_ctl start postgres), so they reach the scripts too.
  log "glibc here: ${have:-unknown}, the bundle needs $need: bundled loader for every program"
  for f in "$HB/bin/"* "$PGB/"*; do
    [ -f "$f" ] && head -c 4 "$f" | grep -q ELF || continue
    mv "$f" "$f.real"
    printf '#!/bin/sh\nexec "%s/ld-linux-x86-64.so.2" --library-path "%s:%s" "%s.real" "$@"\n' "$GL" "$GL" "$LIB" "$f" >"$f"
    chmod 755 "$f"
  done
fi
# Bundled programs get the bundled libraries; the machine's own programs keep theirs.
B() { env LD_LIBRARY_PATH="$LIB" PATH="$HB/bin:$PATH" "$@"; }
H=$HB/bin/herald
B "$H" --help >/dev/null 2>&1 || { log "herald does not start:"; B "$H" --help 2>&1 | head -5 | tee -a "$LOG"; exit 1; }
ulimit -n 65536 2>/dev/null || ulimit -n 16384 2>/dev/null || true

# ---- the step runner: time limit, wall and CPU time, peak RSS, the last JSON line of each stream --
cat >"$W/step.py" <<'PY'
import json, os, signal, subprocess, sys, threading, time
mode, res = sys.argv[1], sys.argv[2]
def last_json(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try: return json.loads(line)
            except ValueError: pass
    return None
def emit(obj):
    with open(res, "a") as f: f.write(json.dumps(obj) + "\n")
if mode == "note":  # note RES NAME key=value...  (values: JSON if they parse, else strings)
    obj = {"step": sys.argv[3]}
    for kv in sys.argv[4:]:
        k, _, v = kv.partition("=")
        try: obj[k] = json.loads(v)
        except ValueError: obj[k] = v
    emit(obj); sys.exit(0)
if mode == "machine":
    info = {"step": "machine", "nproc": len(os.sched_getaffinity(0)), "cpu_count": os.cpu_count(),
            "uname": " ".join(os.uname()), "glibc": os.confstr("CS_GNU_LIBC_VERSION")}
    try:
        info["os"] = dict(l.rstrip().split("=", 1) for l in open("/etc/os-release") if "=" in l).get("PRETTY_NAME", "").strip('"')
    except OSError: pass
    try: info["cpu_model"] = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except Exception: pass
    try: info["cgroup_cpu_max"] = open("/sys/fs/cgroup/cpu.max").read().strip()
    except OSError: pass
    try: info["mem_total_mib"] = int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal"))) // 1024
    except Exception: pass
    for p in ("/tmp", "/dev/shm"):
        try: s = os.statvfs(p); info["free_mib_" + p.strip("/").replace("/", "_")] = s.f_bavail * s.f_frsize // 2**20
        except OSError: pass
    emit(info); sys.exit(0)
# run RES NAME TIMEOUT STDOUT_FILE STDERR_FILE -- command...
name, limit, out_path, err_path = sys.argv[3], float(sys.argv[4]), sys.argv[5], sys.argv[6]
cmd = sys.argv[sys.argv.index("--") + 1:]
timed_out = []
with open(out_path, "wb") as so, open(err_path, "wb") as se:
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=so, stderr=se, start_new_session=True)
    def stop():
        timed_out.append(True)
        try: os.killpg(p.pid, signal.SIGTERM)
        except OSError: pass
        time.sleep(5)
        try: os.killpg(p.pid, signal.SIGKILL)
        except OSError: pass
    timer = threading.Timer(limit, stop); timer.daemon = True; timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    timer.cancel()
    try: os.killpg(p.pid, signal.SIGKILL)  # whatever it left behind
    except OSError: pass
out = open(out_path, errors="replace").read(); err = open(err_path, errors="replace").read()
rc = os.waitstatus_to_exitcode(status)
obj = {"step": name, "cmd": " ".join(cmd), "rc": rc, "timed_out": bool(timed_out), "wall_s": round(wall, 2),
       "user_s": round(ru.ru_utime, 2), "sys_s": round(ru.ru_stime, 2), "max_rss_mib": round(ru.ru_maxrss / 1024, 1),
       "result": last_json(out), "stderr_json": last_json(err)}
if obj["result"] is None: obj["stdout_tail"] = out[-1500:]
if rc != 0 or obj["result"] is None: obj["stderr_tail"] = err[-1500:]
emit(obj)
print("%s: rc %d%s, %.1f s" % (name, rc, " (time limit)" if timed_out else "", wall))
PY
step() {  # step NAME LIMIT command...
  local name=$1 limit=$2; shift 2
  log "step $name (limit ${limit}s): $*"
  python3 "$W/step.py" run "$RES" "$name" "$limit" "$W/$name.out" "$W/$name.err" -- "$@" 2>&1 | tee -a "$LOG"
  tail -c 600 "$W/$name.err" >>"$LOG" 2>/dev/null; echo >>"$LOG"
}
note() { python3 "$W/step.py" note "$RES" "$@"; }
python3 "$W/step.py" machine "$RES"

asuser() { "$@"; }   # replaced below when root: PostgreSQL's programs refuse to run as root

# ---- cleanup of everything started here ------------------------------------------------------------
PGD=$W/pg; NG=$W/nginx; GEN_PID=
cleanup() {
  [ -n "$GEN_PID" ] && kill "$GEN_PID" 2>/dev/null
  [ -f "$NG/nginx.pid" ] && kill "$(cat "$NG/nginx.pid")" 2>/dev/null
  if [ -f "$PGD/data/postmaster.pid" ]; then
    (cd "$W" && asuser env LD_LIBRARY_PATH="$LIB" "$PGB/pg_ctl" -D "$PGD/data" -m immediate -w -t 20 stop) >>"$LOG" 2>&1
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- request lines for herald send (in the background, while PostgreSQL starts) ---------------------
if want send; then
  python3 - "$W/lines.jsonl" "$LINES" <<'PY' &
import json, random, sys
random.seed(11)
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(json.dumps({"id": i, "token": "%064x" % random.getrandbits(256), "topic": "com.example.app",
                            "alert": {"title": "Game Request", "body": "Bob wants to play poker %d" % i},
                            "badge": i % 10, "sound": "default", "custom": {"gameID": str(i)}}) + "\n")
PY
  GEN_PID=$!
fi

free_port() { python3 -c 'import socket,sys
for p in range(int(sys.argv[1]), int(sys.argv[1]) + 100):
    s = socket.socket()
    try: s.bind(("127.0.0.1", p)); print(p); break
    except OSError: pass
    finally: s.close()' "$1"; }

# ---- PostgreSQL 15 as an unprivileged user ---------------------------------------------------------
PGU=; PG_OK=0
if want queue || want queue_p4 || want claimlock || want lanes_queue; then
  if [ "$(id -u)" = 0 ]; then
    # A user of its own; else nobody; else one written into /etc/passwd.
    id -u hbpg >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /bin/sh hbpg >/dev/null 2>&1
    if id -u hbpg >/dev/null 2>&1; then PGU=hbpg
    elif getent passwd 65534 >/dev/null 2>&1; then PGU=$(getent passwd 65534 | cut -d: -f1)
    else
      echo 'hbpg:x:64999:64999:devbench:/nonexistent:/bin/sh' >>/etc/passwd; echo 'hbpg:x:64999:' >>/etc/group
      [ -f /etc/shadow ] && echo 'hbpg:*:19000:0:99999:7:::' >>/etc/shadow
      PGU=hbpg
    fi
    PGUID=$(id -u "$PGU"); PGGID=$(id -g "$PGU")
    # The first way of switching users that works here.
    asuser() { setpriv --reuid="$PGUID" --regid="$PGGID" --clear-groups -- "$@"; }
    if [ "$(asuser id -u 2>/dev/null)" != "$PGUID" ]; then asuser() { runuser -u "$PGU" -- "$@"; }; fi
    if [ "$(asuser id -u 2>/dev/null)" != "$PGUID" ]; then asuser() { su -s /bin/sh "$PGU" -c "$(printf '%q ' "$@")"; }; fi
  else
    PGU=$(id -un); asuser() { "$@"; }
  fi
  log "PostgreSQL runs as $PGU ($(id "$PGU" 2>/dev/null))"
  mkdir -p "$PGD"; chown "$PGU": "$PGD" 2>/dev/null || chown "$PGUID:$PGGID" "$PGD"; chmod 700 "$PGD"
  PGPORT=$(free_port 54329)
  PGOPTS="-p $PGPORT -k $PGD -c listen_addresses=127.0.0.1 -c max_connections=400 -c shared_buffers=1GB -c max_wal_size=8GB"
  PGOPTS="$PGOPTS -c huge_pages=off -c dynamic_shared_memory_type=mmap -c max_parallel_workers_per_gather=0 -c jit=off"
  PGOPTS="$PGOPTS -c timezone=GMT -c log_timezone=GMT"
  [ "${PG_DURABLE:-0}" = 1 ] || PGOPTS="$PGOPTS -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  if (cd "$W" && asuser env LD_LIBRARY_PATH="$LIB" TZ=GMT "$PGB/initdb" -D "$PGD/data" -U postgres -A trust -E UTF8 --locale=C --no-sync) >"$W/initdb.log" 2>&1 \
    && (cd "$W" && asuser env LD_LIBRARY_PATH="$LIB" "$PGB/pg_ctl" -D "$PGD/data" -l "$PGD/server.log" -w -t 60 -o "$PGOPTS" start) >>"$W/initdb.log" 2>&1 \
    && B "$PGB/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -c "CREATE DATABASE bench" >>"$W/initdb.log" 2>&1; then
    PG_OK=1
    log "PostgreSQL $(B "$PGB/psql" -X -At -h 127.0.0.1 -p "$PGPORT" -U postgres -d bench -c 'SHOW server_version') on 127.0.0.1:$PGPORT: $PGOPTS"
    note postgres ok=true port="$PGPORT" options="$PGOPTS" user="$PGU"
  else
    log "PostgreSQL did not start:"; tail -20 "$W/initdb.log" | tee -a "$LOG"; tail -20 "$PGD/server.log" 2>/dev/null | tee -a "$LOG"
    note postgres ok=false log="$(tail -c 1500 "$W/initdb.log"; tail -c 1500 "$PGD/server.log" 2>/dev/null)"
  fi
  printf '{"queue":{"type":"postgres","host":"127.0.0.1","port":%s,"user":"postgres","database":"bench","poll":0.05}}\n' "$PGPORT" >"$W/bench.json"
fi

# The lines are ready before anything is measured (their generator would take a core meanwhile).
GEN_RC=1
if [ -n "$GEN_PID" ]; then wait "$GEN_PID"; GEN_RC=$?; GEN_PID=; log "request lines generated (rc $GEN_RC)"; fi

# ---- (a) the queue ---------------------------------------------------------------------------------
if want queue && [ "$PG_OK" = 1 ]; then
  # What the sessions wait on while the bench runs: pg_stat_activity every 50 ms, counted per step phase.
  ( while :; do B "$PGB/psql" -X -At -h 127.0.0.1 -p "$PGPORT" -U postgres -d bench -c \
      "SELECT coalesce(application_name,'')||'|'||coalesce(wait_event_type,'CPU')||':'||coalesce(wait_event,'-')||'|'||left(regexp_replace(query,'\s+',' ','g'),60) FROM pg_stat_activity WHERE datname='bench' AND state='active' AND pid<>pg_backend_pid()" 2>/dev/null; \
      echo "--"; sleep 0.05; done > "$W/waits.txt" ) &
  WAITS_PID=$!
  step queue "$T_QUEUE" env LD_LIBRARY_PATH="$LIB" "$H" bench queue --config "$W/bench.json" --count "$QCOUNT" \
    --workers "$QWORKERS" --rounds "$QROUNDS" --producers "$QPRODUCERS" --pgbench "$PGB/pgbench"
  kill "$WAITS_PID" 2>/dev/null
  python3 - "$W/waits.txt" "$OUT/waits.txt" <<'PY'
import collections, sys
c = collections.Counter(); snaps = 0
for line in open(sys.argv[1], errors="replace"):
    line = line.rstrip("\n")
    if line == "--": snaps += 1; continue
    if line: c[line] += 1
with open(sys.argv[2], "w") as f:
    f.write("snapshots %d\n" % snaps)
    for k, v in c.most_common(60): f.write("%7d %s\n" % (v, k))
PY
  tail -5 "$PGD/server.log" >>"$LOG" 2>/dev/null
  B "$PGB/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U postgres -d bench -c CHECKPOINT >>"$LOG" 2>&1
fi

# ---- claimlock: the new-row claim's lease statement alone, by pgbench, how the cursor's lock scales ----
# Two forms of herald_claim_lease: as migrated (the cursor row FOR UPDATE) and with an advisory lock
# taken first (waiters queue in order, one woken a commit); 2,000 rows a claim, on a queue filled
# beforehand, at 8, 16 and 32 clients; then 16 clients with 4 sessions inserting meanwhile.
if want claimlock && [ "$PG_OK" = 1 ]; then
  PSQL() { B "$PGB/psql" -X -q -At -h 127.0.0.1 -p "$PGPORT" -U postgres -d bench "$@"; }
  B "$H" enqueue --config "$W/bench.json" /dev/null >>"$LOG" 2>&1   # the schema, if no step migrated it yet
  PSQL -c "SELECT pg_get_functiondef('herald_claim_lease(text,float8,bigint,bigint)'::regprocedure)" \
    | sed -e 's/FUNCTION public.herald_claim_lease(/FUNCTION public.herald_claim_lease_adv(/' \
          -e 's/SELECT \* INTO k FROM herald_cursor FOR UPDATE;/PERFORM pg_advisory_xact_lock(114784820031590); SELECT * INTO k FROM herald_cursor FOR UPDATE;/' \
    >"$W/adv.sql"
  PSQL -f "$W/adv.sql" >>"$LOG" 2>&1
  echo "SELECT * FROM herald_claim_lease('pgb', 30, 1, 2000);" >"$W/claim_row.sql"
  echo "SELECT * FROM herald_claim_lease_adv('pgb', 30, 1, 2000);" >"$W/claim_adv.sql"
  echo "INSERT INTO notifications (body) SELECT 'x' FROM generate_series(1, 5000);" >"$W/insert.sql"
  for run in "8 0" "16 0" "32 0" "16 4"; do
    set -- $run; c=$1; prod=$2
    for v in row adv; do
      PSQL -c "TRUNCATE notifications, herald_outcomes, herald_leases" -c "INSERT INTO notifications (body) SELECT 'x' FROM generate_series(1, 1000000)" >>"$LOG" 2>&1
      PSQL -c "VACUUM ANALYZE notifications" >>"$LOG" 2>&1
      PP=
      if [ "$prod" -gt 0 ]; then
        B "$PGB/pgbench" -n -f "$W/insert.sql" -c "$prod" -j "$prod" -T 8 -h 127.0.0.1 -p "$PGPORT" -U postgres bench >"$W/prod.out" 2>&1 &
        PP=$!
      fi
      t=$(( 400 / c ))
      out=$(B "$PGB/pgbench" -n -f "$W/claim_$v.sql" -c "$c" -j "$c" -t "$t" -h 127.0.0.1 -p "$PGPORT" -U postgres bench 2>&1)
      [ -n "$PP" ] && { kill "$PP" 2>/dev/null; wait "$PP" 2>/dev/null; }
      tps=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p'); lat=$(echo "$out" | sed -n 's/^latency average = \([0-9.]*\).*/\1/p')
      log "claimlock $v clients=$c producers=$prod: tps $tps latency $lat ms"
      note claimlock variant="$v" clients="$c" producers="$prod" tps="${tps:-0}" latency_ms="${lat:-0}" rows_per_s="$(python3 -c "print(round(float('${tps:-0}')*2000))")"
    done
  done
fi

# ---- (b) TLS with 1% invalid tokens ------------------------------------------------------------------
want tls && step tls "$T_TLS" env LD_LIBRARY_PATH="$LIB" "$H" bench tls --count "$TCOUNT" --invalid-fraction 0.01

# ---- (d) the pipeline, then herald send on generated lines ---------------------------------------------
want pipeline && step pipeline "$T_PIPELINE" env LD_LIBRARY_PATH="$LIB" "$H" bench pipeline --count "$PCOUNT" --rounds "$PROUNDS"
if want send1 && [ "$GEN_RC" = 0 ]; then
  step send1 "$T_SEND" env LD_LIBRARY_PATH="$LIB" taskset -c 0 "$H" send "$W/lines.jsonl" --outcomes "$W/send1-outcomes.jsonl" --quiet
  rm -f "$W/send1-outcomes.jsonl"
fi
if want send; then
  if [ "$GEN_RC" = 0 ]; then
    step send "$T_SEND" env LD_LIBRARY_PATH="$LIB" "$H" send "$W/lines.jsonl" --outcomes "$W/send-outcomes.jsonl" --quiet
    note send_check lines="$(wc -l <"$W/lines.jsonl")" input_mib="$(( $(stat -c %s "$W/lines.jsonl") / 1048576 ))" \
      outcome_lines="$(wc -l <"$W/send-outcomes.jsonl" 2>/dev/null || echo 0)" \
      outcomes="$(grep -o '"outcome":"[a-z]*"' "$W/send-outcomes.jsonl" 2>/dev/null | sort | uniq -c | tr -s ' ' | paste -sd, -)"
    rm -f "$W/send-outcomes.jsonl"
  else log "generating the lines failed"; fi
fi

# ---- send with explicit thread counts (scaling curve) ------------------------------------------------
if want sendT && [ "$GEN_RC" = 0 ]; then
  for t in ${SEND_THREADS:-4 8}; do
    step send_t$t "$T_SEND" env LD_LIBRARY_PATH="$LIB" "$H" send "$W/lines.jsonl" --threads "$t" --outcomes "$W/sendt-outcomes.jsonl" --quiet
    rm -f "$W/sendt-outcomes.jsonl"
  done
fi

PERF=
if [ -f "$here/perf.tar.xz" ] && want perf; then tar -C "$W" -xJf "$here/perf.tar.xz" && PERF="env LD_LIBRARY_PATH=$W/perf $W/perf/perf record -e cpu-clock -F 499 -g"; fi
if [ -n "$PERF" ] && [ "$GEN_RC" = 0 ]; then
  step send_perf "$T_SEND" $PERF -o "$OUT/send16.data" -- env LD_LIBRARY_PATH="$LIB" "$H" send "$W/lines.jsonl" --outcomes "$W/sendp-outcomes.jsonl" --quiet
  rm -f "$W/sendp-outcomes.jsonl"
fi

# ---- (c) HTTP/2 against nginx, beside h2load --------------------------------------------------------------
if want http2; then
  mkdir -p "$NG/logs" "$NG/tmp"
  B "$H" certs "$NG/c" >>"$LOG" 2>&1
  NGPORT=$(free_port 8443)
  cat >"$NG/nginx.conf" <<CONF
user root root;
worker_processes auto; daemon on; error_log $NG/logs/error.log; pid $NG/nginx.pid;
events {}
http {
  access_log off;
  client_body_temp_path $NG/tmp/body; proxy_temp_path $NG/tmp/proxy; fastcgi_temp_path $NG/tmp/fastcgi;
  uwsgi_temp_path $NG/tmp/uwsgi; scgi_temp_path $NG/tmp/scgi;
  server {
    listen 127.0.0.1:$NGPORT ssl http2;
    ssl_certificate $NG/c/server.pem; ssl_certificate_key $NG/c/server-key.pem;
    http2_max_concurrent_streams 1000; keepalive_requests 1000000;
    location / { return 200; }
  }
}
CONF
  if B "$HB/bin/nginx" -e "$NG/logs/error.log" -p "$NG" -c "$NG/nginx.conf" >>"$LOG" 2>&1; then
    sleep 0.5
    step http2 "$T_HTTP2" env LD_LIBRARY_PATH="$LIB" PATH="$HB/bin:$PATH" "$H" bench http2 --url "https://127.0.0.1:$NGPORT" \
      --ca "$NG/c/ca.pem" --server-name localhost --h2load --count "$HCOUNT"
    if want http2x8 && [ "$GEN_RC" = 0 ]; then
      # herald send over the http2 transport, 8 connections, beside h2load -c 8 -t 8 on the same server and requests
      head -n "${H8COUNT:-400000}" "$W/lines.jsonl" > "$W/h2lines.jsonl"
      cat >"$W/h2x8.json" <<J
{"transport": {"type": "http2", "host": "127.0.0.1", "port": $NGPORT, "serverName": "localhost", "caFile": "$NG/c/ca.pem",
  "certificate": "$NG/c/client.pem", "key": "$NG/c/client-key.pem", "topic": "com.example.app", "connections": 8}}
J
      step http2x8_herald "$T_HTTP2" env LD_LIBRARY_PATH="$LIB" "$H" send "$W/h2lines.jsonl" --config "$W/h2x8.json" \
        --outcomes "$W/h2x8-out.jsonl" --quiet
      if [ -n "$PERF" ]; then
        step http2x8_perf "$T_HTTP2" $PERF -o "$OUT/h2x8.data" -- env LD_LIBRARY_PATH="$LIB" "$H" send "$W/h2lines.jsonl" --config "$W/h2x8.json" \
          --outcomes "$W/h2x8p-out.jsonl" --quiet
      fi
      note http2x8_check lines="$(wc -l <"$W/h2lines.jsonl")" outcomes="$(grep -o '"outcome":"[a-z]*"' "$W/h2x8-out.jsonl" 2>/dev/null | sort | uniq -c | tr -s ' ' | paste -sd, -)"
      tok=$(printf 'a%.0s' $(seq 64)); printf '{"aps":{"alert":{"title":"Game Request","body":"Bob wants to play poker 1"},"badge":1,"sound":"default"},"gameID":"1"}' > "$W/h2body.json"
      step http2x8_h2load "$T_HTTP2" env LD_LIBRARY_PATH="$LIB" "$HB/bin/h2load" -n "${H8COUNT:-400000}" -c 8 -t 8 -m 1000 \
        -d "$W/h2body.json" -H "apns-topic: com.example.app" -H "apns-push-type: alert" "https://127.0.0.1:$NGPORT/3/device/$tok"
      grep -h "^finished in\|^requests:" "$W/http2x8_h2load.out" | tee -a "$LOG"
    fi
    kill "$(cat "$NG/nginx.pid")" 2>/dev/null; sleep 0.3
  else
    log "nginx did not start"; tail -5 "$NG/logs/error.log" 2>/dev/null | tee -a "$LOG"
    note http2 ok=false error="$(tail -c 800 "$NG/logs/error.log" 2>/dev/null)"
  fi
fi

# ---- lanes (issue 30): a fast-lane notification every 10 ms under a campaign, three ways in ------------
want lanes && step lanes "$T_LANES" env LD_LIBRARY_PATH="$LIB" "$H" bench lanes --count "$LCOUNT"
want lanes_shared && step lanes_shared "$T_LANES" env LD_LIBRARY_PATH="$LIB" "$H" bench lanes --count "$LCOUNT" --no-fast-connection
want lanes_serve && step lanes_serve "$T_LANES" env LD_LIBRARY_PATH="$LIB" "$H" bench lanes --count "$LCOUNT" --via serve
if want lanes_queue && [ "$PG_OK" = 1 ]; then
  step lanes_queue "$T_LANES" env LD_LIBRARY_PATH="$LIB" "$H" bench lanes --count "$LCOUNT" --via queue \
    --config "$W/bench.json" --workers "${LWORKERS:-1}"
elif want lanes_queue; then log "lanes_queue skipped: PostgreSQL not up"; fi

# ---- optional: the queue with 4 producers, TLS over 8 connections -------------------------------------
if want queue_p4 && [ "$PG_OK" = 1 ] && [ $((END_BY - SECONDS)) -ge 80 ]; then
  left=$((END_BY - SECONDS - 20)); [ "$left" -gt 60 ] && left=60
  step queue_p4 "$left" env LD_LIBRARY_PATH="$LIB" "$H" bench queue --config "$W/bench.json" --count "$QCOUNT" \
    --workers 1,4,8 --rounds 3 --producers 4 --pgbench none
elif want queue_p4; then log "queue_p4 skipped (PostgreSQL not up, or ${SECONDS}s already)"; fi
if [ "$PG_OK" = 1 ]; then
  (cd "$W" && asuser env LD_LIBRARY_PATH="$LIB" "$PGB/pg_ctl" -D "$PGD/data" -m fast -w -t 30 stop) >>"$LOG" 2>&1
fi
if want tls8 && [ $((END_BY - SECONDS)) -ge 35 ]; then
  left=$((END_BY - SECONDS)); [ "$left" -gt 50 ] && left=50
  step tls8 "$left" env LD_LIBRARY_PATH="$LIB" "$H" bench tls --count "$TCOUNT" --invalid-fraction 0.01 --connections 8
elif want tls8; then log "tls8 skipped (${SECONDS}s already)"; fi

# ---- summary ----------------------------------------------------------------------------------------
log "done; summary:"
python3 - "$RES" <<'PY' 2>&1 | tee -a "$LOG"
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def pick(r, keys):
    return ", ".join("%s=%s" % (k, r[k]) for k in keys if k in r)
for row in rows:
    s = row["step"]; r = row.get("result") or {}
    if s == "machine":
        print("machine: %s cores (cpu_count %s), %s, %s, %s, cgroup cpu.max %s" % (row.get("nproc"), row.get("cpu_count"),
              row.get("cpu_model"), row.get("os"), row.get("glibc"), row.get("cgroup_cpu_max", "none")))
        continue
    if "rc" in row:
        head = "%s: rc %s%s, %.1f s wall, %.1f s CPU, %s MiB peak" % (s, row["rc"], " TIME LIMIT" if row["timed_out"] else "",
               row["wall_s"], row["user_s"] + row["sys_s"], row["max_rss_mib"])
        print(head)
        if not r and not row.get("stderr_json") and row.get("stderr_tail"): print("  stderr: " + row["stderr_tail"][-400:].replace("\n", " | "))
    if s.startswith("queue") and r:
        counts = sorted({int(m.group(1)) for m in (re.match(r"workers_(\d+)_per_s$", k) for k in r) if m})
        print("  send_per_s=%s  %s" % (r.get("send_per_s"), "  ".join("w%d=%s" % (n, r.get("workers_%d_per_s" % n)) for n in counts)))
        print("  ratio_1_worker_to_send=%s more_workers_never_slower=%s cores=%s producers=%s" % (r.get("ratio_1_worker_to_send"),
              r.get("more_workers_never_slower"), r.get("cores"), r.get("producers")))
        prev = None
        for n in counts:
            v = r.get("workers_%d_per_s" % n)
            print("  workers %d: best %s (x%.2f of the count before)  rounds %s  enqueue share %s  cores busy %s  pgbench %s" % (
                n, v, v / prev if prev else 1.0, r.get("workers_%d_rounds_per_s" % n), r.get("workers_%d_rounds_enqueue_share" % n),
                r.get("workers_%d_rounds_cores_busy" % n), r.get("pgbench_%d_rows_per_s" % n)))
            prev = v
        print("  send rounds %s" % r.get("send_rounds_per_s"))
    elif s.startswith("tls") and r:
        print("  " + pick(r, ["tls_protocol", "invalid_0_percent_notifications_per_second", "invalid_0.1_percent_notifications_per_second",
              "invalid_1_percent_notifications_per_second", "ratio_invalid_to_clean", "reconnections_per_second",
              "ceiling_ratio_invalid_to_clean", "connections_1_notifications_per_second", "handshakes", "all_outcomes_correct"]
              + [k for k in r if k.startswith("connections_") and k.endswith("_notifications_per_second") and k != "connections_1_notifications_per_second"]))
    elif s == "pipeline" and r:
        print("  " + pick(r, ["requests", "requests_per_second", "touch_only_loop_requests_per_second", "ratio_to_touch_only_loop",
              "baseline_loop_requests_per_second", "ratio_to_baseline", "round_requests_per_second", "peak_rss_mib", "balanced"]))
    elif s == "send" or s.startswith("send_t") or s == "send1" or s == "http2x8_herald":
        j = row.get("stderr_json") or {}
        j = j.get("summary", j)
        print("  " + pick(j, ["entered", "accepted", "failed", "balanced", "elapsed_s", "rate_per_s"]))
    elif s == "send_check":
        print("  send: %s lines (%s MiB) -> %s outcome lines: %s" % (row.get("lines"), row.get("input_mib"), row.get("outcome_lines"), row.get("outcomes")))
    elif s.startswith("lanes") and r:
        print("  " + pick(r, ["via", "fast_lane_connection", "bulk_notifications", "streams", "workers", "bulk_alone_per_s", "bulk_with_fast_per_s",
              "ratio_bulk_with_fast_to_alone", "fast_sends", "fast_p50_ms", "fast_p99_ms", "fast_max_ms", "duplicates", "peak_rss_mib", "goal_met"]))
    elif s == "http2" and r:
        print("  " + ", ".join("%s=%s" % (k, v) for k, v in r.items() if not isinstance(v, (list, dict))))
    elif s == "postgres" and not row.get("ok"):
        print("postgres did not start: " + str(row.get("log"))[-600:])
    elif s == "http2" and row.get("ok") is False:
        print("http2: nginx did not start: " + str(row.get("error")))
PY
log "total ${SECONDS}s"
