#!/bin/sh
# termgrade's offline verifier toolchain: `uv tool run` and `uv run` are uvx, `uv pip install` its pip (see uvx.py);
# every other uv command needs the network.
if [ "$1" = "tool" ] && [ "$2" = "run" ]; then shift 2; exec /opt/termgrade-verifier/bin/uvx "$@"; fi
# `uv run` of pytest is uvx's run, unless a project would be installed first (its pyproject.toml, here or above).
if [ "$1" = "run" ]; then
  shift
  case " $* " in *" --no-project "*) exec /opt/termgrade-verifier/bin/uvx "$@" ;; esac
  d=$(pwd)
  while :; do
    if [ -f "$d/pyproject.toml" ]; then
      echo "termgrade offline verifier toolchain: uv run in the project $d/pyproject.toml installs the project, which needs the network; run it with --no-project, or uvx" >&2
      exit 2
    fi
    [ "$d" = "/" ] && break
    d=$(dirname "$d")
  done
  exec /opt/termgrade-verifier/bin/uvx "$@"
fi
if [ "$1" = "pip" ] && [ "$2" = "install" ]; then shift 1; exec /opt/termgrade-verifier/bin/python3 /opt/termgrade-verifier/lib/uvx.py --termgrade-pip "$@"; fi
if [ "$1" = "--version" ]; then echo "uv (termgrade offline verifier toolchain)"; exit 0; fi
echo "termgrade offline verifier toolchain: uv $* needs the network, which this verifier does not have" >&2
exit 2
