from pathlib import Path

OUT = Path('/app/errors.txt')


def lines():
    return OUT.read_text().strip().splitlines()


def test_file_exists():
    assert OUT.is_file()


def test_line_format():
    for line in lines():
        name, count = line.split(' ')
        assert name and count.isdigit()


def test_counts():
    got = dict(line.split(' ') for line in lines())
    assert got == {'db': '3', 'api': '2', 'worker': '1', 'cache': '1'}


def test_order():
    assert [line.split(' ')[0] for line in lines()] == ['db', 'api', 'cache', 'worker']
