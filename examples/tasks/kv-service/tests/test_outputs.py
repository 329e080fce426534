import os
import urllib.request
from pathlib import Path

URL = 'http://127.0.0.1:8080'


def test_pid_file_names_live_process():
    pid = int(Path('/run/kv.pid').read_text().strip())
    os.kill(pid, 0)
    assert 'kv.py' in Path(f'/proc/{pid}/cmdline').read_text()


def test_health():
    assert urllib.request.urlopen(f'{URL}/health', timeout=5).read() == b'ok'


def test_reads_existing_data():
    assert urllib.request.urlopen(f'{URL}/get?key=greeting', timeout=5).read() == b'hello'


def test_writes_persist():
    req = urllib.request.Request(f'{URL}/set?key=probe', data=b'42', method='PUT')
    assert urllib.request.urlopen(req, timeout=5).status == 200
    # The tests see the sandbox's files as they were when grading began; what the running
    # service writes since is read through its own view of the filesystem.
    pid = int(Path('/run/kv.pid').read_text().strip())
    assert '"probe": "42"' in Path(f'/proc/{pid}/root/app/data.json').read_text()
