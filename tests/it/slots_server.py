"""A small OpenAI Chat Completions server for tests/it/slots.rs (issue 35 item 0), written from
the documented wire shapes with the standard library only, no evalgrid code. It counts at the
server what evalgrid must never do: more requests in flight than `/props` says it has slots,
and requests sent again.

Prints `PORT n` once listening, then serves until killed. Options:
  --slots N       answer `GET /props` with llama.cpp's `{"total_slots": N, ...}` (0: 404, as
                  a server without `/props`)
  --llama         send `Server: llama.cpp` on every response, as llama.cpp's server does
  --latency S     each answer takes S seconds
  --gather N      hold each answer until N requests are in flight (or 5 s): shows that the
                  client does send N at once
  --hold-body S   request 1: the response head at once, then S seconds of silence before its
                  first event (a request queued behind busy slots, as a proxy answers it)
  --hold-head S   request 2: S seconds before even the response head
  --stall S       request 1: its first event, then S seconds of silence (a stalled stream)
`GET /_stats` answers {"posts", "max_in_flight", "props_gets"}. A request counts as in flight
from its arrival until just before its last byte is written, so the server never counts more
than the client has open.
"""
import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--slots", type=int, default=0)
ap.add_argument("--llama", action="store_true")
ap.add_argument("--latency", type=float, default=0.0)
ap.add_argument("--gather", type=int, default=0)
ap.add_argument("--hold-body", type=float, default=0.0)
ap.add_argument("--hold-head", type=float, default=0.0)
ap.add_argument("--stall", type=float, default=0.0)
args = ap.parse_args()

lock = threading.Condition()
stats = {"posts": 0, "max_in_flight": 0, "props_gets": 0}
in_flight = 0


def arrive():
    global in_flight
    with lock:
        stats["posts"] += 1
        in_flight += 1
        stats["max_in_flight"] = max(stats["max_in_flight"], in_flight)
        lock.notify_all()
        return stats["posts"]


def leave():
    global in_flight
    with lock:
        in_flight -= 1
        lock.notify_all()


def gather():
    if args.gather:
        with lock:
            lock.wait_for(lambda: in_flight >= args.gather, timeout=5)


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: every response ends when the connection closes, so a stream needs no framing.
    protocol_version = "HTTP/1.0"

    def log_message(self, *a):
        pass

    def head(self, status, content_type, length=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.flush()

    def json(self, status, value, before_body=None):
        body = json.dumps(value).encode()
        self.head(status, "application/json", len(body))
        if before_body:
            before_body()
        self.wfile.write(body)

    def version_string(self):
        return "llama.cpp" if args.llama else "slots-server"

    def do_GET(self):
        if self.path == "/_stats":
            with lock:
                return self.json(200, dict(stats))
        if self.path == "/props" and args.slots > 0:
            with lock:
                stats["props_gets"] += 1
            return self.json(200, {"total_slots": args.slots, "default_generation_settings": {"n_ctx": 4096}})
        if self.path == "/props":
            with lock:
                stats["props_gets"] += 1
        self.json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        n = arrive()
        left = []

        def done():
            if not left:
                left.append(True)
                leave()

        try:
            gather()
            time.sleep(args.latency)
            model = body.get("model", "")
            if body.get("stream"):
                self.stream(n, model, done)
            else:
                answer = {
                    "id": f"c{n}",
                    "object": "chat.completion",
                    "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                }
                self.json(200, answer, before_body=done)
        finally:
            done()

    def stream(self, n, model, done):
        if n == 2 and args.hold_head:
            time.sleep(args.hold_head)
        self.head(200, "text/event-stream")
        if n == 1 and args.hold_body:
            time.sleep(args.hold_body)

        def event(value):
            self.wfile.write(b"data: " + json.dumps(value).encode() + b"\n\n")
            self.wfile.flush()

        chunk = {"id": f"c{n}", "object": "chat.completion.chunk", "model": model}
        event({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "A"}, "finish_reason": None}]})
        if n == 1 and args.stall:
            time.sleep(args.stall)
        event({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        event({**chunk, "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})
        done()
        self.wfile.write(b"data: [DONE]\n\n")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


server = Server(("127.0.0.1", 0), Handler)
print(f"PORT {server.server_address[1]}", flush=True)
server.serve_forever()
