import os
import stat
import subprocess
import tempfile
from pathlib import Path

SCRIPT = '/app/rotate.sh'


def make(files):
    d = Path(tempfile.mkdtemp())
    for name, text in files.items():
        (d / name).write_text(text)
    return d


def rotate(arg):
    return subprocess.run([SCRIPT, *arg], capture_output=True, text=True, timeout=10)


def test_executable():
    assert os.access(SCRIPT, os.X_OK)


def test_full_rotation():
    d = make({'app.log': 'now', 'app.log.1': 'one', 'app.log.2': 'two', 'app.log.3': 'three', 'other.txt': 'x'})
    assert rotate([str(d)]).returncode == 0
    assert (d / 'app.log.1').read_text() == 'now'
    assert (d / 'app.log.2').read_text() == 'one'
    assert (d / 'app.log.3').read_text() == 'two'
    assert not (d / 'app.log.4').exists()
    assert (d / 'other.txt').read_text() == 'x'


def test_new_log_empty_with_mode():
    d = make({'app.log': 'now'})
    assert rotate([str(d)]).returncode == 0
    assert (d / 'app.log').read_text() == ''
    assert stat.S_IMODE((d / 'app.log').stat().st_mode) == 0o640


def test_gaps_are_skipped():
    d = make({'app.log': 'now', 'app.log.2': 'two'})
    assert rotate([str(d)]).returncode == 0
    assert sorted(p.name for p in d.iterdir()) == ['app.log', 'app.log.1', 'app.log.3']


def test_bad_argument():
    r = rotate(['/no/such/folder'])
    assert r.returncode == 2 and r.stderr.strip()
    assert rotate([]).returncode == 2
