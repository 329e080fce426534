import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
db.executescript('''
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id),
                     amount_cents INTEGER NOT NULL, status TEXT NOT NULL);
''')
names = ['Ada', 'Brook', 'Cyd', 'Dara', 'Eli', 'Fen']
db.executemany('INSERT INTO customers (id, name) VALUES (?, ?)', list(enumerate(names, 1)))
orders = [
    (1, 50000, 'paid'), (1, 25050, 'paid'), (1, 90000, 'refunded'),
    (2, 120000, 'pending'), (2, 10000, 'paid'),
    (3, 70000, 'paid'), (3, 4025, 'paid'),
    (4, 80000, 'paid'),
    (5, 74999, 'paid'), (5, 100, 'cancelled'),
    (6, 30000, 'paid'), (6, 30000, 'paid'),
]
db.executemany('INSERT INTO orders (customer_id, amount_cents, status) VALUES (?, ?, ?)', orders)
db.commit()
