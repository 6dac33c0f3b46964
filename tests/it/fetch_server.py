"""A misbehaving file server for `evalgrid datasets fetch` (tests/it/datasets_fetch.rs).

Prints its port, then serves until killed:
  /rows.jsonl        the rows (ROWS below)
  /auth/rows.jsonl   the rows, only with HTTP Basic alice:s3cret (else 401)
  /drip/rows.jsonl   a Content-Length of 1000, then one byte every 5 s
  /trickle/rows.jsonl one byte every 0.2 s, for ever (chunked)
  /huge/rows.jsonl   a Content-Length of 2 GiB, then nothing (the body never comes)
  /endless/rows.jsonl chunked zeros for ever
Every body byte sent is counted in the file named by argv[1] (`path count`, one per line).
"""

import base64
import http.server
import sys
import time

ROWS = b'{"input": "What is 2+2?", "target": "4"}\n{"input": "Capital of France?", "target": "Paris"}\n'
COUNTS = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def sent(self, n):
        with open(COUNTS, "a") as f:
            f.write(f"{self.path} {n}\n")

    def head(self, status=200, length=None):
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()
        self.sent(len(data))

    def do_GET(self):
        try:
            self.answer()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def answer(self):
        if self.path == "/rows.jsonl":
            self.head(length=len(ROWS))
            self.wfile.write(ROWS)
            self.sent(len(ROWS))
        elif self.path == "/auth/rows.jsonl":
            want = "Basic " + base64.b64encode(b"alice:s3cret").decode()
            if self.headers.get("Authorization") != want:
                self.head(401, length=0)
                return
            self.head(length=len(ROWS))
            self.wfile.write(ROWS)
            self.sent(len(ROWS))
        elif self.path == "/drip/rows.jsonl":
            self.head(length=1000)
            for _ in range(1000):
                self.wfile.write(b"x")
                self.wfile.flush()
                self.sent(1)
                time.sleep(5)
        elif self.path == "/trickle/rows.jsonl":
            self.head()
            while True:
                self.chunk(b"x")
                time.sleep(0.2)
        elif self.path == "/huge/rows.jsonl":
            self.head(length=2 << 30)
            time.sleep(3600)
        elif self.path == "/endless/rows.jsonl":
            self.head()
            while True:
                self.chunk(b"\0" * 65536)
        else:
            self.head(404, length=0)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
