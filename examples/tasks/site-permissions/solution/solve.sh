#!/bin/bash
set -euo pipefail
chown -R deploy:web /srv/site
find /srv/site -type d -exec chmod 2775 {} +
find /srv/site -type f -exec chmod 664 {} +
find /srv/site/bin -maxdepth 1 -type f -name '*.sh' -exec chmod 775 {} +
chmod 600 /srv/site/.env
