import json
from pathlib import Path

SUMMARY = Path('/app/summary.json')


def load():
    return json.loads(SUMMARY.read_text())


def test_summary_exists():
    assert SUMMARY.is_file()


def test_regions_sorted():
    assert list(load().keys()) == ['east', 'north', 'south', 'west']


def test_units_skip_bad_rows():
    data = load()
    assert data['north']['units'] == 6
    assert data['south']['units'] == 4


def test_revenue_rounded():
    data = load()
    assert data['east']['revenue'] == 27.5
    assert data['south']['revenue'] == 16.75
    assert data['west']['revenue'] == 23.75
