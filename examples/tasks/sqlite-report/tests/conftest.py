"""Writes /logs/verifier/ctrf.json (Common Test Report Format) without any plugin from the internet."""
import json
import time

_tests = []
_start = time.time()


def pytest_runtest_logreport(report):
    if report.when == 'call' or (report.when == 'setup' and report.outcome != 'passed'):
        _tests.append({
            'name': report.nodeid,
            'status': 'skipped' if report.skipped else report.outcome,
            'duration': round(report.duration * 1000),
            'message': str(report.longrepr).splitlines()[-1] if report.failed else None,
        })


def pytest_sessionfinish(session, exitstatus):
    count = lambda s: sum(1 for t in _tests if t['status'] == s)
    summary = {'tests': len(_tests), 'passed': count('passed'), 'failed': count('failed'),
               'skipped': count('skipped'), 'pending': 0, 'other': 0,
               'start': int(_start * 1000), 'stop': int(time.time() * 1000)}
    with open('/logs/verifier/ctrf.json', 'w') as f:
        json.dump({'results': {'tool': {'name': 'pytest'}, 'summary': summary, 'tests': _tests}}, f, indent=1)
