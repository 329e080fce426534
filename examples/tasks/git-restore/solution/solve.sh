#!/bin/bash
set -euo pipefail
cd /app/repo
git checkout HEAD~1 -- config.ini
git commit -qm "Restore config.ini"
