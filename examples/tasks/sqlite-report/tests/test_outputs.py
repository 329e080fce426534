import csv
from pathlib import Path

OUT = Path('/app/top_customers.csv')


def rows():
    return list(csv.reader(OUT.read_text().splitlines()))


def test_header():
    assert rows()[0] == ['name', 'total']


def test_three_rows():
    assert len(rows()) == 4


def test_only_paid_orders_count():
    names = [r[0] for r in rows()[1:]]
    assert 'Brook' not in names


def test_ranking_and_totals():
    assert rows()[1:] == [['Dara', '800.00'], ['Ada', '750.50'], ['Eli', '749.99']]
