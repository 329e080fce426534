#!/bin/bash
set -euo pipefail
cat /var/log/app/*.log | awk '$2 == "ERROR" { sub(":$", "", $3); n[$3]++ } END { for (s in n) print s, n[s] }' \
  | sort -k2,2nr -k1,1 > /app/errors.txt
