import os
import subprocess

import pytest

BIN = '/app/wc-lite'


def run(data: bytes) -> str:
    return subprocess.run([BIN], input=data, capture_output=True, check=True, timeout=10).stdout.decode().strip()


def test_binary_built():
    assert os.access(BIN, os.X_OK)


def test_no_final_newline():
    assert run(b'one two three') == '0 3 13'


def wc(data: bytes) -> str:
    out = subprocess.run(['wc'], input=data, capture_output=True, check=True).stdout.split()
    return ' '.join(x.decode() for x in out)


@pytest.mark.parametrize('data', [b'', b'a\tb  c\n', b'  lead and trail  \n\n', b'x\n\ty\vz'])
def test_whitespace(data):
    assert run(data) == wc(data)


def test_matches_wc_on_source():
    data = open('/app/wc-lite.c', 'rb').read()
    assert run(data) == wc(data)


def test_fixed_source_builds_the_fixed_program(tmp_path):
    # The fix belongs in the source: a fresh build of /app/wc-lite.c must behave like wc too.
    fresh = tmp_path / 'wc-lite'
    subprocess.run(['cc', '-O2', '-o', str(fresh), '/app/wc-lite.c'], check=True, capture_output=True, timeout=60)
    for data in [b'', b'one two three', b'a\tb  c\n', b'  lead and trail  \n\n']:
        got = subprocess.run([str(fresh)], input=data, capture_output=True, check=True, timeout=10).stdout.decode().strip()
        assert got == wc(data)
