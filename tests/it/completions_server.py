"""An OpenAI-compatible completions server for `method: loglikelihood` (tests/it/qa_loglikelihood.rs).

It answers `POST /v1/completions` in the shape OpenAI documents for the legacy endpoint and
vLLM serves: with `echo: true` and `logprobs: N`, `choices[0].logprobs` holds the prompt's own
tokens, their log-probabilities (the first `null`), their top alternatives and their
`text_offset`s, then the one generated token. Neither evalgrid nor lm-eval wrote it: both talk
to it over HTTP, and each computes its own log-likelihoods from what it sends.

The "model" is a toy: a tokenizer that cuts words into pieces of at most three letters (with
their leading whitespace), digits and punctuation one by one; a token's log-probability is a
fixed function of the 12 characters before it and the token, higher for a word piece the
prompt already holds, so a continuation's log-likelihood depends on its context and its length.

usage: completions_server.py COUNTS [MODE]   prints its port, serves until killed; every
request's path and prompt (JSON) are appended to COUNTS, tab-separated. MODE `no-echo` answers without the prompt's tokens
(a server that ignores `echo`).
"""

import hashlib
import http.server
import json
import re
import sys

COUNTS = sys.argv[1]
MODE = sys.argv[2] if len(sys.argv) > 2 else "echo"
TOKEN = re.compile(r"\s*[A-Za-z]{1,3}|\s*\d|\s*[^\sA-Za-z\d]|\s+$", re.S)


def tokenize(text):
    tokens = TOKEN.findall(text)
    assert "".join(tokens) == text, (tokens, text)
    return tokens


def logprob(before, token):
    h = hashlib.blake2b((before[-12:] + "|" + token).encode(), digest_size=4).digest()
    lp = -1.0 - int.from_bytes(h, "little") % 1000 / 500.0
    # A word piece seen earlier in the prompt is likelier (a hint is copied).
    word = token.strip().lower()
    if len(word) >= 2 and word in before.lower():
        lp += 1.5
    return lp


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with open(COUNTS, "a") as f:
            f.write(self.path + "\t" + json.dumps(body.get("prompt")) + "\n")
        if self.path != "/v1/completions":
            return self.reply(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
        prompt = body["prompt"]
        tokens = tokenize(prompt)
        generated = " the"
        offsets, at = [], 0
        for t in tokens:
            offsets.append(at)
            at += len(t)
        lps = [None] + [logprob(prompt[: offsets[i]], tokens[i]) for i in range(1, len(tokens))]
        gen_lp = logprob(prompt, generated)
        logprobs = {
            "tokens": tokens + [generated],
            "token_logprobs": lps + [gen_lp],
            "top_logprobs": [None] + [{tokens[i]: lps[i]} for i in range(1, len(tokens))] + [{generated: gen_lp}],
            "text_offset": offsets + [len(prompt)],
        }
        echo = body.get("echo") and MODE == "echo"
        if not echo:
            logprobs = {k: v[-1:] for k, v in logprobs.items()}
        text = (prompt if echo else "") + generated
        self.reply(200, {
            "id": "cmpl-toy",
            "object": "text_completion",
            "created": 0,
            "model": body.get("model", "toy"),
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": 1, "total_tokens": len(tokens) + 1},
        })


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
