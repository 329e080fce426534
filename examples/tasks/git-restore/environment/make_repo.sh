#!/bin/bash
set -euo pipefail
git config --global user.email dev@example.com
git config --global user.name Dev
git config --global init.defaultBranch main
mkdir -p /app/repo && cd /app/repo && git init -q
printf '[server]\nport = 8080\nworkers = 4\n' > config.ini
printf '# Service\n' > README.md
git add . && git commit -qm "initial"
printf '# Service\n\nRun it with ./run.sh\n' > README.md
git commit -qam "document running"
git rm -q config.ini
printf '# Service\n\nRun it with ./run.sh (see config.ini).\n' > README.md
git commit -qam "cleanup"
