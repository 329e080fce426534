#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv, json
totals = {}
with open('/app/sales.csv', newline='') as f:
    for row in csv.DictReader(f):
        if not row['units'].strip().isdigit():
            continue
        t = totals.setdefault(row['region'], {'units': 0, 'revenue': 0.0})
        t['units'] += int(row['units'])
        t['revenue'] += int(row['units']) * float(row['unit_price'])
out = {k: {'units': v['units'], 'revenue': round(v['revenue'], 2)} for k, v in sorted(totals.items())}
with open('/app/summary.json', 'w') as f:
    json.dump(out, f, indent=2)
PY
