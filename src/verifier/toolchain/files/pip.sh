#!/bin/sh
# termgrade's offline verifier toolchain: stands in for pip / pip3 (`pip install` of what the toolchain serves; see uvx.py).
exec /opt/termgrade-verifier/bin/python3 /opt/termgrade-verifier/lib/uvx.py --termgrade-pip "$@"
