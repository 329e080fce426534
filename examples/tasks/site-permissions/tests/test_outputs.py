import grp
import os
import pwd
import stat
from pathlib import Path

ROOT = Path('/srv/site')


def everything():
    return [ROOT, *ROOT.rglob('*')]


def mode(p):
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_owner_and_group():
    for p in everything():
        st = os.lstat(p)
        assert pwd.getpwuid(st.st_uid).pw_name == 'deploy', p
        assert grp.getgrgid(st.st_gid).gr_name == 'web', p


def test_folder_modes():
    for p in everything():
        if p.is_dir():
            assert mode(p) == 0o2775, p


def test_script_modes():
    assert mode(ROOT / 'bin/deploy.sh') == 0o775
    assert mode(ROOT / 'bin/clean.sh') == 0o775
    assert mode(ROOT / 'bin/NOTES.txt') == 0o664


def test_plain_file_modes():
    assert mode(ROOT / 'public/index.html') == 0o664
    assert mode(ROOT / 'public/css/site.css') == 0o664


def test_secret_file():
    assert mode(ROOT / '.env') == 0o600
    assert (ROOT / '.env').read_text() == 'DB_PASSWORD=hunter2\n'
