#!/bin/sh
# termgrade's offline verifier toolchain: pytest from the toolchain, with what its pip served (see uvx.py).
exec /opt/termgrade-verifier/bin/python3 /opt/termgrade-verifier/lib/uvx.py pytest "$@"
