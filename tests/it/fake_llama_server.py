#!/usr/bin/env python3
"""A stand-in for llama.cpp's `llama-server`, for tests that need a served model's keys and
calls but not a model: `--version` prints a version as llama-server does; otherwise it serves
`GET /health` (200) and `POST /v1/chat/completions`, answering with a digest of the bytes of
`-m FILE` and of `--chat-template-file FILE` as it reads them, and appends one line per
completion to the file named by `FAKE_LLAMA_CALLS`."""

import hashlib
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def opt(args, name):
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1 :]
    return None


def digest(path):
    if path is None:
        return "none"
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:12]


def main():
    args = sys.argv[1:]
    if "--version" in args:
        print("version: 1 (fake)")
        print("built with a test")
        return
    port = int(opt(args, "--port"))
    weights, template = opt(args, "-m"), opt(args, "--chat-template-file")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_):
            pass

        def send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                self.send(200, {"status": "ok"})
            else:
                self.send(404, {"error": {"message": "not found"}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            if self.path != "/v1/chat/completions":
                self.send(404, {"error": {"message": "not found"}})
                return
            with open(os.environ["FAKE_LLAMA_CALLS"], "a") as f:
                f.write("call\n")
            text = f"weights {digest(weights)} template {digest(template)}"
            self.send(200, {
                "id": "c1", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            })

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
