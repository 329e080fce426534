import subprocess

REPO = '/app/repo'


def git(*args):
    return subprocess.run(['git', '-C', REPO, *args], check=True, capture_output=True, text=True).stdout


def test_config_restored_in_head():
    assert git('show', 'HEAD:config.ini') == '[server]\nport = 8080\nworkers = 4\n'


def test_parent_is_cleanup():
    assert git('log', '-1', '--format=%s', 'HEAD~1').strip() == 'cleanup'


def test_history_kept():
    subjects = git('log', '--format=%s').split('\n')
    assert subjects[1:4] == ['cleanup', 'document running', 'initial']


def test_readme_change_kept():
    assert 'see config.ini' in git('show', 'HEAD:README.md')


def test_worktree_clean():
    assert git('status', '--porcelain').strip() == ''
