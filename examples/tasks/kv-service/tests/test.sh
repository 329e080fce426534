#!/bin/bash
# Writes reward.json with the pass fraction next to the binary reward.
cd /tests
python3 -m pytest -rA -p no:cacheprovider test_outputs.py > /tmp/pytest.txt
rc=$?
cat /tmp/pytest.txt
passed=$(grep -c '^PASSED ' /tmp/pytest.txt)
total=$(grep -cE '^(PASSED|FAILED|ERROR) ' /tmp/pytest.txt)
python3 - "$rc" "$passed" "$total" <<'PY'
import json, sys
rc, passed, total = (int(x) for x in sys.argv[1:])
json.dump({'reward': 1 if rc == 0 else 0, 'fraction_passed': passed / total if total else 0.0},
          open('/logs/verifier/reward.json', 'w'))
PY
