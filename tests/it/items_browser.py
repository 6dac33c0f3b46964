#!/usr/bin/env python3
"""Drives an evalgrid item page in headless Chromium over the DevTools protocol
(`--remote-debugging-pipe`: no network port, no Python package beyond the standard
library) and prints what a reader sees, as JSON on stdout:

  {"filters": {"all": [keys], "failed": [...], ...},       # rows shown after clicking each filter
   "flipped": {"<baseline model>": [keys], ...},           # after choosing each baseline
   "labels": {"all": "all (12)", ...},                     # the filter buttons' texts
   "search": {"query": q, "rows": [keys]},                 # after typing q into the search box
   "sorted": [keys],                                       # after clicking the first model's column
   "metrics": {"<metric>": {"filters": {...}, "labels": {...}, "cells": {key: [texts]}}},
                                                           # after choosing each metric
   "console": [messages]}                                  # console/CSP/exception messages

A key is `task|seed|item`. Every click is a real mouse event at the element's centre.
Usage: items_browser.py CHROMIUM PAGE.html PROFILE_DIR [QUERY]. Exit 3: no Chromium.
"""

import json
import os
import subprocess
import sys
import time


class Browser:
    def __init__(self, binary, profile):
        to_child_r, self.to_child_w = os.pipe()
        self.from_child_r, from_child_w = os.pipe()

        def fds():
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=fds)
        os.close(to_child_r)
        os.close(from_child_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def send(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_child_w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self.read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def read(self):
        while b"\0" not in self.buf:
            chunk = os.read(self.from_child_r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def eval(self, expr):
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def click(self, selector):
        rect = self.eval(f"(function(){{var e=document.querySelector({json.dumps(selector)});e.scrollIntoView({{block:'center'}});"
                         "var r=e.getBoundingClientRect();return [r.left+r.width/2,r.top+r.height/2];})()")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": rect[0], "y": rect[1], "button": "left", "clickCount": 1})

    def choose(self, selector, value):
        # A <select> is chosen as a user's keyboard would: set the value, fire `change`.
        self.eval(f"(function(){{var s=document.querySelector({json.dumps(selector)});s.value={json.dumps(value)};"
                  "s.dispatchEvent(new Event('change'));})()")

    def rows(self):
        return self.eval("Array.prototype.map.call(document.querySelectorAll('#items tbody tr'),function(r){return r.dataset.key;})")

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main():
    binary, page, profile = sys.argv[1], sys.argv[2], sys.argv[3]
    query = sys.argv[4] if len(sys.argv) > 4 else ""
    if not os.path.isfile(binary):
        print(f"no chromium at {binary}", file=sys.stderr)
        sys.exit(3)
    b = Browser(binary, profile)
    try:
        target = b.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        b.session = b.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            b.send(f"{domain}.enable")
        b.send("Page.navigate", {"url": "file://" + os.path.abspath(page)})
        deadline = time.time() + 30
        while not b.eval("document.readyState==='complete'&&!!document.getElementById('count')&&document.getElementById('count').textContent!==''"):
            if time.time() > deadline:
                raise RuntimeError("the page never drew its rows")
            time.sleep(0.05)
        out = {"filters": {}, "flipped": {}, "labels": {}}
        b.choose("#size", "0")
        for f in ("failed", "errored", "different", "flipped", "all"):
            b.click(f"#controls button[data-filter={f}]")
            out["filters"][f] = b.rows()
        models = b.eval("Array.prototype.map.call(document.querySelectorAll('#baseline option'),function(o){return o.textContent;})")
        b.click("#controls button[data-filter=flipped]")
        for i, m in enumerate(models):
            b.choose("#baseline", str(i))
            out["flipped"][m] = b.rows()
        out["labels"] = b.eval("(function(){var o={};document.querySelectorAll('#controls button[data-filter]').forEach(function(x){o[x.dataset.filter]=x.textContent;});return o;})()")
        b.click("#controls button[data-filter=all]")
        if query:
            b.click("#q")
            b.send("Input.insertText", {"text": query})
            out["search"] = {"query": query, "rows": b.rows()}
            b.eval("(function(){var q=document.getElementById('q');q.value='';q.dispatchEvent(new Event('input'));})()")
        b.click("#items thead th:nth-child(4)")
        out["sorted"] = b.rows()
        out["metrics"] = {}
        names = b.eval("Array.prototype.map.call(document.querySelectorAll('#metric option'),function(o){return o.textContent;})")
        for i, name in enumerate(names):
            b.choose("#metric", str(i))
            seen = {"filters": {}}
            for f in ("failed", "errored", "none", "different", "all"):
                b.click(f"#controls button[data-filter={f}]")
                seen["filters"][f] = b.rows()
            seen["labels"] = b.eval("(function(){var o={};document.querySelectorAll('#controls button[data-filter]').forEach(function(x){o[x.dataset.filter]=x.textContent;});return o;})()")
            seen["shown"] = b.eval("document.getElementById('shown').textContent")
            seen["cells"] = b.eval("(function(){var o={};document.querySelectorAll('#items tbody tr').forEach(function(r){o[r.dataset.key]="
                                   "Array.prototype.filter.call(r.children,function(c,i){return i>=3&&(i-3)%2===0;}).map(function(c){return c.firstChild?c.firstChild.textContent:'';});});return o;})()")
            out["metrics"][name] = seen
        b.choose("#metric", "0")
        out["injected"] = b.eval("document.querySelectorAll('#items img, #items script, #items [onerror], #items [onmouseover]').length")
        out["console"] = [json.dumps(e.get("params", {}))[:500] for e in b.events
                          if e.get("method") in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded")]
        print(json.dumps(out))
    finally:
        b.close()


if __name__ == "__main__":
    main()
