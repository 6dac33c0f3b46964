#!/usr/bin/env python3
"""An independent mock of the OpenAI Batch API, Anthropic Message Batches and Gemini batch
mode (and the live endpoints beside them).

Written from OpenAI's documented shapes only (no evalgrid code or structs): `POST /v1/files`
(multipart, purpose=batch), `POST /v1/batches`, `GET /v1/batches/{id}`, `GET /v1/batches`
(limit/after, newest first), `POST /v1/batches/{id}/cancel`, `GET /v1/files/{id}/content`;
and the live `POST /v1/chat/completions` and `POST /v1/responses`. A request gets the same
answer live or in a batch (a pure function of its body), so a batched run and a live run of
one grid must give the same report.

It counts every request inside each created batch (the requests a provider bills for) by
body and by `custom_id` (`billed`: their total), and every live request by body. Control (JSON): `GET /_control/stats`, `POST /_control/config`
with any of `hold` (batches stay in_progress), `expire_next` (the next N batches created
expire without answering), `create_delay_s` (the create answer is delayed after the batch
exists: a slow create, so a kill lands while it is in flight), `list_delay_s` (a new batch
shows in the list endpoints only this long after it was created, as a provider's list is
eventually consistent; `GET` by id sees it at once), `duplicate_lines` (each answer of a
completed batch is followed by a second line for the same `custom_id` with another answer),
`complete_after_polls`. `lists` counts the list requests.

Anthropic (from docs.anthropic.com's Message Batches reference): `POST /v1/messages/batches`
(`requests: [{custom_id, params}]`), `GET /v1/messages/batches/{id}` (`processing_status`,
`request_counts`, `results_url`), `GET …/{id}/results` (JSONL), `POST …/{id}/cancel`,
`GET /v1/messages/batches` (`limit`, `after_id`; newest first), live `POST /v1/messages`.
Gemini (from ai.google.dev's batch mode reference): `POST /v1beta/models/{m}:batchGenerateContent`
(inline `requests.requests[{request, metadata}]`), `GET /v1beta/batches/{id}` (an operation:
`metadata.state`, `done`, `response.inlinedResponses.inlinedResponses`), `POST
/v1beta/batches/{id}:cancel`, `GET /v1beta/batches` (`pageSize`, `pageToken`), live `POST
/v1beta/models/{m}:generateContent`.

Usage: batch_mock.py  -> prints `PORT <n>` on its first line, then serves until killed.
"""
import hashlib
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
FILES = {}  # id -> bytes
BATCHES = {}  # id -> batch object (dict)
ORDER = []  # batch ids, oldest first
BODIES = {}  # batch id -> list of (custom_id, url, body)
POLLS = {}  # batch id -> polls seen
EXPIRING = set()
CONFIG = {"hold": False, "expire_next": 0, "create_delay_s": 0.0, "list_delay_s": 0.0, "duplicate_lines": False, "complete_after_polls": 2}
STATS = {"batched": {}, "batched_ids": {}, "live": {}, "creates": 0, "uploads": 0, "cancels": 0, "expired": {}, "billed": 0, "lists": 0}
CREATED = {}  # batch id -> when it was created (time.time())
COUNTER = [0]


def listed(order):
    """The batch ids a list shows now, newest first: those created at least `list_delay_s` ago."""
    STATS["lists"] += 1
    now = time.time()
    return [b for b in reversed(order) if now - CREATED.get(b, 0) >= CONFIG["list_delay_s"]]


def repeated(answer, body):
    """A second, different answer for a duplicate output line."""
    text, _ = reply_text(body)
    return json.loads(json.dumps(answer).replace(text, "A repeated line. The answer is: (Z)"))


def next_id(prefix):
    COUNTER[0] += 1
    return f"{prefix}{COUNTER[0]:06d}"


def digest(body):
    """A request's identity: its body, less the stream switch (a streamed call asks the same)."""
    if isinstance(body, dict) and "stream" in body:
        body = {k: v for k, v in body.items() if k != "stream"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def prompt_text(body):
    parts = []
    for content in body.get("contents") or []:
        parts.extend(p.get("text", "") for p in content.get("parts") or [] if isinstance(p, dict))
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
    inp = body.get("input")
    if isinstance(inp, str):
        parts.append(inp)
    elif isinstance(inp, list):
        for item in inp:
            content = item.get("content") if isinstance(item, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
    return "\n".join(parts)


def reply_text(body):
    h = int(digest(body)[:8], 16)
    choices = ["(A)", "(B)", "(C)", "yes", "no", "unknown", "True", "False", "3", "12"]
    return f"Let me think. The answer is: {choices[h % len(choices)]}", 5 + h % 40


def chat_answer(body):
    text, out = reply_text(body)
    return {
        "id": "chatcmpl-" + digest(body)[:16],
        "object": "chat.completion",
        "created": 1700000000,
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": max(1, len(prompt_text(body)) // 4), "completion_tokens": out, "total_tokens": max(1, len(prompt_text(body)) // 4) + out},
    }


def responses_answer(body):
    text, out = reply_text(body)
    tokens = max(1, len(prompt_text(body)) // 4)
    return {
        "id": "resp_" + digest(body)[:16],
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": body.get("model", ""),
        "output": [{"type": "message", "id": "msg_" + digest(body)[:8], "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": tokens, "output_tokens": out, "total_tokens": tokens + out},
    }


ANSWER = {"/v1/chat/completions": chat_answer, "/v1/responses": responses_answer}


def anthropic_answer(body):
    text, out = reply_text(body)
    tokens = max(1, len(prompt_text(body)) // 4)
    return {
        "id": "msg_" + digest(body)[:16],
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": tokens, "output_tokens": out},
    }


def anthropic_events(message):
    """A Messages answer as the documented stream of server-sent events."""
    start = dict(message, content=[], stop_reason=None, usage=dict(message["usage"], output_tokens=1))
    text = message["content"][0]["text"]
    return [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None}, "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
        ("message_stop", {"type": "message_stop"}),
    ]


def gemini_answer(body, model):
    text, out = reply_text(body)
    tokens = max(1, len(prompt_text(body)) // 4)
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": tokens, "candidatesTokenCount": out, "totalTokenCount": tokens + out},
        "modelVersion": model,
        "responseId": digest(body)[:12],
    }


def iso(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + ".000000Z"


CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ANT = {}  # Anthropic batch id -> batch object
ANT_ORDER = []
ANT_RESULTS = {}  # id -> JSONL bytes
GEM = {}  # Gemini batch name -> operation
GEM_ORDER = []


def count_created(bid, pairs):
    """Counts the requests of a created batch (custom_id, body); returns whether it expires."""
    expiring = CONFIG["expire_next"] > 0
    if expiring:
        CONFIG["expire_next"] -= 1
        EXPIRING.add(bid)
    counts = STATS["expired"] if expiring else STATS["batched"]
    for custom_id, body in pairs:
        counts[digest(body)] = counts.get(digest(body), 0) + 1
        if not expiring:
            STATS["batched_ids"][custom_id] = STATS["batched_ids"].get(custom_id, 0) + 1
            STATS["billed"] += 1
    STATS["creates"] += 1
    CREATED[bid] = time.time()
    return expiring


def ant_create(req):
    requests = req.get("requests")
    if not isinstance(requests, list) or not requests:
        return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": "requests: a non-empty list is required"}}
    ids = [r.get("custom_id") for r in requests]
    if any(not isinstance(i, str) or not CUSTOM_ID.match(i) for i in ids) or len(set(ids)) != len(ids):
        return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": "custom_id must match ^[a-zA-Z0-9_-]{1,64}$ and be unique"}}
    if any(not isinstance(r.get("params"), dict) or "model" not in r["params"] or "max_tokens" not in r["params"] for r in requests):
        return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": "params: model and max_tokens are required"}}
    bid = next_id("msgbatch_")
    BODIES[bid] = [(r["custom_id"], "/v1/messages", r["params"]) for r in requests]
    count_created(bid, [(r["custom_id"], r["params"]) for r in requests])
    now = time.time()
    batch = {"id": bid, "type": "message_batch", "processing_status": "in_progress",
             "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
             "ended_at": None, "created_at": iso(now), "expires_at": iso(now + 86400), "archived_at": None,
             "cancel_initiated_at": None, "results_url": None}
    ANT[bid] = batch
    ANT_ORDER.append(bid)
    return 200, batch


def ant_advance(batch, port):
    bid = batch["id"]
    if batch["processing_status"] == "ended":
        return
    POLLS[bid] = POLLS.get(bid, 0) + 1
    canceling = batch["processing_status"] == "canceling"
    if not canceling and (CONFIG["hold"] or POLLS[bid] < CONFIG["complete_after_polls"]):
        return
    kind = "canceled" if canceling else "expired" if bid in EXPIRING else "succeeded"
    lines = []
    for custom_id, _, body in BODIES[bid]:
        result = {"type": kind}
        if kind == "succeeded":
            result["message"] = anthropic_answer(body)
        lines.append({"custom_id": custom_id, "result": result})
        if kind == "succeeded" and CONFIG["duplicate_lines"]:
            lines.append({"custom_id": custom_id, "result": {"type": kind, "message": repeated(result["message"], body)}})
    ANT_RESULTS[bid] = "".join(json.dumps(line) + "\n" for line in lines).encode()
    counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    counts[kind] = len(lines)
    batch.update({"processing_status": "ended", "request_counts": counts, "ended_at": iso(time.time()),
                  "results_url": f"http://127.0.0.1:{port}/v1/messages/batches/{bid}/results"})


GEM_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch"


def gem_create(model, req):
    batch = req.get("batch") or {}
    name = batch.get("display_name", batch.get("displayName"))
    config = batch.get("input_config", batch.get("inputConfig")) or {}
    requests = ((config.get("requests") or {}).get("requests")) or []
    if not name or not requests or any(not isinstance(r.get("request"), dict) for r in requests):
        return 400, {"error": {"code": 400, "message": "batch.display_name and inline requests are required", "status": "INVALID_ARGUMENT"}}
    bid = "batches/" + next_id("gb")
    keys = [((r.get("metadata") or {}).get("key"), r["request"]) for r in requests]
    BODIES[bid] = [(key, model, body) for key, body in keys]
    count_created(bid, keys)
    now = time.time()
    op = {"name": bid, "metadata": {"@type": GEM_TYPE, "name": bid, "model": f"models/{model}", "displayName": name,
          "createTime": iso(now), "updateTime": iso(now), "state": "BATCH_STATE_PENDING",
          "batchStats": {"requestCount": str(len(requests)), "pendingRequestCount": str(len(requests))}}}
    GEM[bid] = op
    GEM_ORDER.append(bid)
    return 200, op


def gem_advance(op):
    bid = op["name"]
    meta = op["metadata"]
    if op.get("done"):
        return
    POLLS[bid] = POLLS.get(bid, 0) + 1
    cancelling = meta.get("cancel") is True
    if meta["state"] == "BATCH_STATE_PENDING" and not cancelling:
        meta["state"] = "BATCH_STATE_RUNNING"
    if not cancelling and (CONFIG["hold"] or POLLS[bid] < CONFIG["complete_after_polls"]):
        return
    meta.pop("cancel", None)
    n = len(BODIES[bid])
    op["done"] = True
    meta["updateTime"] = meta["endTime"] = iso(time.time())
    if cancelling or bid in EXPIRING:
        meta["state"] = "BATCH_STATE_CANCELLED" if cancelling else "BATCH_STATE_EXPIRED"
        meta["batchStats"] = {"requestCount": str(n), "failedRequestCount": str(n)}
        return
    meta["state"] = "BATCH_STATE_SUCCEEDED"
    meta["batchStats"] = {"requestCount": str(n), "successfulRequestCount": str(n)}
    responses = []
    for key, model, body in BODIES[bid]:
        responses.append({"response": gemini_answer(body, model), "metadata": {"key": key}})
        if CONFIG["duplicate_lines"]:
            responses.append({"response": repeated(gemini_answer(body, model), body), "metadata": {"key": key}})
    op["response"] = {"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatchOutput",
                      "inlinedResponses": {"inlinedResponses": responses}}


def parse_multipart(content_type, data):
    boundary = re.search(r"boundary=\"?([^\";]+)\"?", content_type).group(1).encode()
    fields = {}
    for part in data.split(b"--" + boundary):
        if b"\r\n\r\n" not in part:
            continue
        head, _, value = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]+)"', head)
        if name:
            fields[name.group(1).decode()] = value[:-2] if value.endswith(b"\r\n") else value
    return fields


def advance(batch):
    """One poll's worth of progress."""
    bid = batch["id"]
    if batch["status"] in ("completed", "failed", "expired", "cancelled"):
        return
    if batch["status"] == "cancelling":
        finish(batch, "cancelled")
        return
    POLLS[bid] = POLLS.get(bid, 0) + 1
    if batch["status"] == "validating":
        batch["status"] = "in_progress"
        batch["in_progress_at"] = int(time.time())
    if CONFIG["hold"] or POLLS[bid] < CONFIG["complete_after_polls"]:
        return
    finish(batch, "expired" if bid in EXPIRING else "completed")


def finish(batch, status):
    bid = batch["id"]
    out_lines, err_lines = [], []
    for custom_id, url, body in BODIES[bid]:
        if status == "completed":
            resp = {"status_code": 200, "request_id": "req_" + digest(body)[:12], "body": ANSWER[url](body)}
            out_lines.append({"id": "batch_req_" + digest([bid, custom_id])[:16], "custom_id": custom_id, "response": resp, "error": None})
            if CONFIG["duplicate_lines"]:
                again = dict(resp, body=repeated(resp["body"], body))
                out_lines.append({"id": "batch_req_" + digest([bid, custom_id, 2])[:16], "custom_id": custom_id, "response": again, "error": None})
        else:
            code = "batch_expired" if status == "expired" else "batch_cancelled"
            err_lines.append({"id": "batch_req_" + digest([bid, custom_id])[:16], "custom_id": custom_id, "response": None, "error": {"code": code, "message": "This request could not be executed before the batch ended."}})
    batch["status"] = status
    batch[f"{status}_at"] = int(time.time())
    done = len(BODIES[bid]) - len(err_lines)
    batch["request_counts"] = {"total": len(BODIES[bid]), "completed": done, "failed": len(err_lines)}
    if out_lines:
        fid = next_id("file-out")
        FILES[fid] = "".join(json.dumps(line) + "\n" for line in out_lines).encode()
        batch["output_file_id"] = fid
    if err_lines:
        fid = next_id("file-err")
        FILES[fid] = "".join(json.dumps(line) + "\n" for line in err_lines).encode()
        batch["error_file_id"] = fid


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, value, raw=None):
        data = raw if raw is not None else json.dumps(value).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json" if raw is None else "application/octet-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events):
        data = "".join(f"event: {name}\ndata: {json.dumps(value)}\n\n" for name, value in events).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        return self.rfile.read(int(self.headers.get("content-length", "0")))

    def do_GET(self):
        path, _, query = self.path.partition("?")
        with LOCK:
            if path == "/_control/stats":
                return self.send(200, dict(STATS, batches=[BATCHES[b] for b in ORDER] + [ANT[b] for b in ANT_ORDER] + [GEM[b] for b in GEM_ORDER]))
            m = re.fullmatch(r"/v1/files/([^/]+)/content", path)
            if m:
                return self.send(200, None, raw=FILES[m.group(1)]) if m.group(1) in FILES else self.send(404, {"error": {"message": "no such file"}})
            m = re.fullmatch(r"/v1/batches/([^/]+)", path)
            if m:
                batch = BATCHES.get(m.group(1))
                if batch is None:
                    return self.send(404, {"error": {"message": "no such batch"}})
                advance(batch)
                return self.send(200, batch)
            args = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
            m = re.fullmatch(r"/v1/messages/batches/([^/]+)(/results)?", path)
            if m:
                if self.headers.get("anthropic-version") is None:
                    return self.send(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "anthropic-version header is required"}})
                batch = ANT.get(m.group(1))
                if batch is None:
                    return self.send(404, {"type": "error", "error": {"type": "not_found_error", "message": "no such batch"}})
                if m.group(2):
                    if m.group(1) not in ANT_RESULTS:
                        return self.send(404, {"type": "error", "error": {"type": "not_found_error", "message": "the batch has not ended"}})
                    return self.send(200, None, raw=ANT_RESULTS[m.group(1)])
                ant_advance(batch, self.server.server_address[1])
                return self.send(200, batch)
            if path == "/v1/messages/batches":
                limit = int(args.get("limit", "20"))
                newest = listed(ANT_ORDER)
                if "after_id" in args and args["after_id"] in newest:
                    newest = newest[newest.index(args["after_id"]) + 1:]
                page = newest[:limit]
                return self.send(200, {"data": [ANT[b] for b in page], "first_id": page[0] if page else None, "last_id": page[-1] if page else None, "has_more": len(newest) > limit})
            m = re.fullmatch(r"/v1beta/(batches/[^/:]+)", path)
            if m:
                op = GEM.get(m.group(1))
                if op is None:
                    return self.send(404, {"error": {"code": 404, "message": "no such batch", "status": "NOT_FOUND"}})
                gem_advance(op)
                return self.send(200, op)
            if path == "/v1beta/batches":
                size = int(args.get("pageSize", "20"))
                start = int(args.get("pageToken", "0") or "0")
                newest = listed(GEM_ORDER)
                page = newest[start:start + size]
                more = start + size < len(newest)
                return self.send(200, dict({"operations": [GEM[b] for b in page]}, **({"nextPageToken": str(start + size)} if more else {})))
            if path == "/v1/batches":
                limit = int(args.get("limit", "20"))
                newest = listed(ORDER)
                if "after" in args and args["after"] in newest:
                    newest = newest[newest.index(args["after"]) + 1:]
                page = newest[:limit]
                return self.send(200, {"object": "list", "data": [BATCHES[b] for b in page], "first_id": page[0] if page else None, "last_id": page[-1] if page else None, "has_more": len(newest) > limit})
        self.send(404, {"error": {"message": "unknown path"}})

    def do_POST(self):
        raw = self.body()
        path = self.path.partition("?")[0]
        if path == "/_control/config":
            with LOCK:
                CONFIG.update(json.loads(raw))
            return self.send(200, CONFIG)
        if path in ANSWER:
            body = json.loads(raw)
            with LOCK:
                STATS["live"][digest(body)] = STATS["live"].get(digest(body), 0) + 1
            return self.send(200, ANSWER[path](body))
        if path == "/v1/messages":
            body = json.loads(raw)
            with LOCK:
                STATS["live"][digest(body)] = STATS["live"].get(digest(body), 0) + 1
            if body.get("stream"):
                return self.send_sse(anthropic_events(anthropic_answer(body)))
            return self.send(200, anthropic_answer(body))
        m = re.fullmatch(r"/v1beta/models/([^/:]+):(generateContent|batchGenerateContent)", path)
        if m and m.group(2) == "generateContent":
            body = json.loads(raw)
            with LOCK:
                STATS["live"][digest(body)] = STATS["live"].get(digest(body), 0) + 1
            return self.send(200, gemini_answer(body, m.group(1)))
        if m or path == "/v1/messages/batches":
            if path == "/v1/messages/batches" and self.headers.get("anthropic-version") is None:
                return self.send(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "anthropic-version header is required"}})
            with LOCK:
                code, value = gem_create(m.group(1), json.loads(raw)) if m else ant_create(json.loads(raw))
                delay = CONFIG["create_delay_s"] if code == 200 else 0
            if delay:
                time.sleep(delay)
            return self.send(code, value)
        m = re.fullmatch(r"/v1/messages/batches/([^/]+)/cancel", path)
        if m:
            with LOCK:
                batch = ANT.get(m.group(1))
                if batch is None:
                    return self.send(404, {"type": "error", "error": {"type": "not_found_error", "message": "no such batch"}})
                STATS["cancels"] += 1
                if batch["processing_status"] == "in_progress":
                    batch["processing_status"] = "canceling"
                    batch["cancel_initiated_at"] = iso(time.time())
                return self.send(200, batch)
        m = re.fullmatch(r"/v1beta/(batches/[^/:]+):cancel", path)
        if m:
            with LOCK:
                op = GEM.get(m.group(1))
                if op is None:
                    return self.send(404, {"error": {"code": 404, "message": "no such batch", "status": "NOT_FOUND"}})
                STATS["cancels"] += 1
                if not op.get("done"):
                    op["metadata"]["cancel"] = True
                return self.send(200, {})
        if path == "/v1/files":
            fields = parse_multipart(self.headers.get("content-type", ""), raw)
            if fields.get("purpose") != b"batch" or "file" not in fields:
                return self.send(400, {"error": {"message": "purpose=batch and file are required"}})
            with LOCK:
                fid = next_id("file-in")
                FILES[fid] = fields["file"]
                STATS["uploads"] += 1
            return self.send(200, {"id": fid, "object": "file", "bytes": len(fields["file"]), "purpose": "batch", "filename": "input.jsonl"})
        m = re.fullmatch(r"/v1/batches/([^/]+)/cancel", path)
        if m:
            with LOCK:
                batch = BATCHES.get(m.group(1))
                if batch is None:
                    return self.send(404, {"error": {"message": "no such batch"}})
                STATS["cancels"] += 1
                if batch["status"] not in ("completed", "failed", "expired", "cancelled"):
                    batch["status"] = "cancelling"
                return self.send(200, batch)
        if path == "/v1/batches":
            req = json.loads(raw)
            with LOCK:
                text = FILES.get(req.get("input_file_id"))
                if text is None or req.get("completion_window") != "24h" or req.get("endpoint") not in ANSWER:
                    return self.send(400, {"error": {"message": "bad batch request"}})
                lines = [json.loads(line) for line in text.decode().splitlines() if line.strip()]
                if any(line.get("method") != "POST" or line.get("url") != req["endpoint"] for line in lines):
                    return self.send(400, {"error": {"message": "each line must POST to the batch's endpoint"}})
                bid = next_id("batch_")
                BODIES[bid] = [(line["custom_id"], line["url"], line["body"]) for line in lines]
                expiring = CONFIG["expire_next"] > 0
                if expiring:
                    CONFIG["expire_next"] -= 1
                    EXPIRING.add(bid)
                counts = STATS["expired"] if expiring else STATS["batched"]
                for custom_id, _, body in BODIES[bid]:
                    counts[digest(body)] = counts.get(digest(body), 0) + 1
                    if not expiring:
                        STATS["batched_ids"][custom_id] = STATS["batched_ids"].get(custom_id, 0) + 1
                        STATS["billed"] += 1
                STATS["creates"] += 1
                CREATED[bid] = time.time()
                batch = {"id": bid, "object": "batch", "endpoint": req["endpoint"], "errors": None, "input_file_id": req["input_file_id"], "completion_window": "24h", "status": "validating", "output_file_id": None, "error_file_id": None, "created_at": int(time.time()), "metadata": req.get("metadata"), "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
                BATCHES[bid] = batch
                ORDER.append(bid)
                delay = CONFIG["create_delay_s"]
            if delay:
                time.sleep(delay)
            return self.send(200, batch)
        self.send(404, {"error": {"message": "unknown path"}})


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """A client killed mid-request (the tests kill -9 evalgrid) is not an error here."""


def main():
    server = Server(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
