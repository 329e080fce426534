#!/bin/bash
set -euo pipefail
cat > /app/rotate.sh <<'SH'
#!/bin/bash
set -eu
dir=${1:-}
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
  echo "usage: rotate.sh FOLDER" >&2
  exit 2
fi
cd "$dir"
rm -f app.log.3
for n in 2 1; do
  [ -e "app.log.$n" ] && mv "app.log.$n" "app.log.$((n + 1))"
done
[ -e app.log ] && mv app.log app.log.1
: > app.log
chmod 640 app.log
SH
chmod +x /app/rotate.sh
