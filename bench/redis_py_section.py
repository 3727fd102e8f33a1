"""One redis-py Lock holder for the handoff benchmark: waits for the lock (redis-py polls every
0.1 s by default), runs the section command, releases."""
import subprocess
import sys

import redis

port, key, stamp, path, ms = sys.argv[1:6]
client = redis.Redis(host="127.0.0.1", port=int(port))
lock = client.lock(key, timeout=30, blocking_timeout=120)
if not lock.acquire():
    sys.exit(75)
try:
    subprocess.run([stamp, path, ms], check=True)
finally:
    lock.release()
