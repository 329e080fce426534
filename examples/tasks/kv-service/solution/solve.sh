#!/bin/bash
# The service is left running in the background, still holding this script's stdout:
# the harness must not wait for it.
python3 /app/kv.py --port 8080 --data /app/data.json &
echo $! > /run/kv.pid
for _ in $(seq 1 50); do
  python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8080/health")' 2>/dev/null && exit 0
  sleep 0.1
done
exit 1
