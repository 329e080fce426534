#!/usr/bin/env bash
# Stops and removes the extra Docker engines the multi-engine tests start (test/support/engines.ts
# makes them under /run/termgrade-test-engines and /var/lib/termgrade-test-engines, and removes
# them itself; this is for a test run that was killed before it could). Never touches the main engine.
set -uo pipefail
RUN=/run/termgrade-test-engines
DATA=/var/lib/termgrade-test-engines
for pidfile in "$RUN"/*.pid; do
  [ -e "$pidfile" ] || continue
  kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
done
sleep 2
pkill -9 -f "$RUN/" 2>/dev/null || true
pkill -9 -f -- "--data-root $DATA/" 2>/dev/null || true
for dir in "$DATA" "$RUN"; do
  [ -d "$dir" ] || continue
  awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$dir"
done
