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


# Every file's content as deployed: the fix must change owners and modes only.
CONTENT = {
    '.env': 'f5d8af3578df946ed70a0189db2f7a713fdfe6017d9ac2d99602939e622894c9',
    'bin/NOTES.txt': '96d9e6bad07afb6b6497832521c05b2c6401cd7ebf34ee47898584a46ae19ee5',
    'bin/clean.sh': 'f74ff546798df11cf0f92f13fa255d33633fb3828117419d7284db615e19dcb8',
    'bin/deploy.sh': 'f06780cea5d2adda12fcadf13003031e1577023d11f2d6c0555862e7aed74561',
    'public/css/site.css': 'c5d674ffb3cd445f2bd80f3943577b3a4778c033b056a5ec08948bfe7bf95dfb',
    'public/index.html': '186ea20da38447cf0c59fa62a9dfaea3bdcca431517b83d3a9c00ebc2044e95a',
}


def test_contents_unchanged():
    import hashlib
    for rel, digest in CONTENT.items():
        assert hashlib.sha256((ROOT / rel).read_bytes()).hexdigest() == digest, f'{rel} changed'
