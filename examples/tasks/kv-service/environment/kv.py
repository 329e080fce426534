"""A tiny key-value store over HTTP: GET /get?key=K, PUT /set?key=K (body = value), GET /health."""
import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument('--host', default='127.0.0.1')
parser.add_argument('--port', type=int, default=9000)
parser.add_argument('--data', required=True, help='JSON file holding the store')
args = parser.parse_args()

with open(args.data) as f:
    store = json.load(f)


class Handler(BaseHTTPRequestHandler):
    def reply(self, code, body):
        data = body.encode()
        self.send_response(code)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlparse(self.path)
        if url.path == '/health':
            return self.reply(200, 'ok')
        key = parse_qs(url.query).get('key', [''])[0]
        if url.path == '/get' and key in store:
            return self.reply(200, store[key])
        self.reply(404, 'not found')

    def do_PUT(self):
        url = urlparse(self.path)
        key = parse_qs(url.query).get('key', [''])[0]
        if url.path != '/set' or not key:
            return self.reply(400, 'bad request')
        store[key] = self.rfile.read(int(self.headers.get('Content-Length', 0))).decode()
        with open(args.data, 'w') as f:
            json.dump(store, f)
        self.reply(200, 'stored')


print(f'listening on {args.host}:{args.port}', flush=True)
ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
