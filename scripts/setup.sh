#!/usr/bin/env bash
# One-shot, idempotent machine set-up for termgrade on a Debian machine (this kind and CI):
#   1. Debian packages: the Docker engine, debootstrap, tmux, strace; openssh-server and chromium (tests only).
#   2. A Docker engine with no bridge and no iptables (no private-range addresses ever).
#   3. On an engine with no bridge (this kind), image builds on the host's network, asked for
#      explicitly in /etc/termgrade/engine.json (see below for why).
#   4. Base images made locally with debootstrap (no registry is reachable here).
#   5. npm packages and the TypeScript build.
# Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

need_apt=()
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
# check records what each task's verifier executes and reads with strace, from outside the container.
[ -x /usr/bin/strace ] || need_apt+=(strace)
# The multi-engine tests reach one engine over ssh (an sshd on 127.0.0.1 that the test starts).
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
# The report and viewer tests drive Debian's chromium with playwright-core (no browser download).
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# The Debian docker.io client lives in /usr/bin; some images ship a newer client in /usr/local/bin.
# Either talks to the engine below; termgrade itself uses the Engine API, not the CLI.
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (bridge and iptables off)"
  mkdir -p /var/log
  setsid nohup dockerd --bridge=none --iptables=false --ip-forward=false --ip-masq=false \
    >/var/log/termgrade-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see /var/log/termgrade-dockerd.log"; exit 1; }
fi

# termgrade builds task images on the engine's default network, never the host's own unless asked:
# a RUN step of an untrusted task could otherwise reach services on the host's loopback. An engine
# with no bridge (dockerd --bridge=none, as above: no private-range address ever) has no default
# network, so on such a machine builds can fetch packages only through the host's network. Ask
# for that here, once, in the machine's engine settings (termgrade reads them; an operator's own
# file, TERMGRADE_BUILD_NETWORK or --build-network take precedence as README.md says).
ENGINE_SETTINGS=${TERMGRADE_ENGINE_SETTINGS:-/etc/termgrade/engine.json}
if ! docker network inspect bridge >/dev/null 2>&1 && [ ! -e "$ENGINE_SETTINGS" ]; then
  log "this engine has no bridge network: image builds will use the host's network ($ENGINE_SETTINGS)"
  mkdir -p "$(dirname "$ENGINE_SETTINGS")"
  cat >"$ENGINE_SETTINGS" <<'JSON'
{
  "build_network": "host",
  "reason": "written by termgrade's scripts/setup.sh: this Docker engine runs with --bridge=none (no private-range addresses), so it has no default network; image builds reach package mirrors through the host's network, and a build's RUN steps can reach the host's loopback services"
}
JSON
fi

# Base images: the upstream names that task Dockerfiles use, built from Debian's own packages.
make_base() { # name suite
  local name=$1 suite=$2
  if docker image inspect "$name" >/dev/null 2>&1; then return; fi
  log "making base image $name with debootstrap (about a minute)"
  local mirror rootfs
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || { log "cannot find a Debian mirror in the apt sources"; exit 1; }
  rootfs=$(mktemp -d /tmp/termgrade-rootfs.XXXXXX)
  debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >/tmp/termgrade-debootstrap.log 2>&1 \
    || { log "debootstrap failed; see /tmp/termgrade-debootstrap.log"; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import -c 'CMD ["bash"]' - "$name" >/dev/null
  rm -rf "$rootfs"
}
make_base debian:bookworm-slim bookworm
docker image inspect debian:bookworm >/dev/null 2>&1 || docker tag debian:bookworm-slim debian:bookworm

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "installing npm packages"
  npm ci --no-audit --no-fund --loglevel=error
fi
log "building"
npm run --silent build
# `npx termgrade` finds the bin here first: no lookup of the package registry, ever, even while
# another npx termgrade runs (npm otherwise resolves the project's own bin through its cache).
ln -sfn ../../dist/src/cli/main.js node_modules/.bin/termgrade
log "ready"
