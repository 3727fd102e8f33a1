#!/bin/sh
# Two "hosts" race for one lock against a private redis-server: one runs the report, the other
# skips with exit status 75 and says who holds it. Then a deploy hook waits its turn.
set -eu
rlock=${RLOCK:-./build/rlock}
dir=$(mktemp -d)
redis-server --port 0 --unixsocket "$dir/redis.sock" --save '' --appendonly no \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir"
trap 'kill "$(cat "$dir/redis.pid" 2>/dev/null)" 2>/dev/null; rm -rf "$dir"' EXIT
i=0
until redis-cli -s "$dir/redis.sock" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "redis-server did not start" >&2; exit 1; }
    sleep 0.05
done
export RLOCK_REDIS_URL="unix://$dir/redis.sock"

cat > "$dir/report.sh" <<'SCRIPT'
#!/bin/sh
echo "[$RLOCK_HOSTNAME] making the daily report (fence $RLOCK_FENCE)"
sleep 2
echo "[$RLOCK_HOSTNAME] report done"
SCRIPT
chmod +x "$dir/report.sh"

host() { # host NAME RLOCK-ARGS...: one cron host running rlock
    name=$1; shift
    rc=0
    RLOCK_HOSTNAME=$name "$rlock" "$@" || rc=$?
    echo "[$name] rlock exited with $rc"
}

echo "== web-1 and web-2 start the same cron job at the same moment"
host web-1 run lock:daily-report -- "$dir/report.sh" &
host web-2 run lock:daily-report -- "$dir/report.sh" &
sleep 0.5
echo "== meanwhile, an operator asks Redis who holds the lock:"
redis-cli -s "$dir/redis.sock" GET lock:daily-report
wait

echo "== web-1 makes the report again; web-3 has a deploy hook under the same lock that must run,"
echo "   so it waits its turn (--wait 1m) instead of skipping"
host web-1 run lock:daily-report -- "$dir/report.sh" &
sleep 0.3
host web-3 run --wait 1m lock:daily-report -c 'echo "[web-3] migrating (fence $RLOCK_FENCE)"'
wait

echo "== locks left in Redis:"
redis-cli -s "$dir/redis.sock" --scan --pattern 'lock:*' | grep . || echo "(none)"
