# evalgrid Eleusis judge worker (embedded in pyjudge.rs with include_str!).
#
# Runs LLM-written guess code (a function body, spec section 3.2) the way the reference
# benchmark does: wrapped as `def evaluate_rule(card, mainline):`, restricted builtins, the
# global name `Card`, result coerced with bool(). It speaks line-delimited JSON on
# stdin/stdout; the Rust side drives the equivalence walk (section 3.3) and asks for whole
# states (52 cards each) per request. The worker is never told the secret rule's verdicts:
# it returns the guess's outputs and Rust compares them, so guess code that escapes the
# restricted builtins finds no answer key in any frame, global or request of this process.
#
# Isolation (defence in depth; restricted builtins are not a security boundary): the parent
# starts us with an empty environment (except PYTHONHASHSEED=0), -s -S -B, cwd in a fresh
# empty temp dir; here we close inherited fds, set rlimits (address space, CPU, open files,
# processes, file size, core) and install an audit hook that refuses every audited event
# (open, os.*, subprocess, socket, import, exec, compile ...) while guess code runs. Per-call
# CPU timeouts come from an ITIMER_PROF timer; the parent kills us on a wall-clock overrun.

import dataclasses
import enum
import json
import math
import os
import resource
import signal
import sys
import textwrap
import time

WORKER_VERSION = 2
SUIT_SPECS = (
    ("HEARTS", ("hearts", "\u2665", "red")),
    ("DIAMONDS", ("diamonds", "\u2666", "red")),
    ("CLUBS", ("clubs", "\u2663", "black")),
    ("SPADES", ("spades", "\u2660", "black")),
)
TICK_S = 0.02
MAX_ERRORS = 8


class _CallTimeout(BaseException):
    """One guess call used more CPU than its per-call limit."""


class _Deadline(BaseException):
    """The whole request passed its wall-clock deadline."""


class _State:
    guarding = False  # True only while guess code runs (audit hook and timer act then)
    call_seq = 0
    seen_seq = -1
    ticks = 0
    tick_limit = 10
    deadline = math.inf
    fn = None
    cards = None


S = _State()


def _audit(event, args):
    if S.guarding:
        raise RuntimeError("sandbox: operation not permitted (" + event + ")")


def _on_tick(signum, frame):
    if not S.guarding:
        return
    if time.monotonic() > S.deadline:
        raise _Deadline()
    if S.call_seq != S.seen_seq:
        S.seen_seq = S.call_seq
        S.ticks = 0
        return
    S.ticks += 1
    if S.ticks >= S.tick_limit:
        S.ticks = 0
        raise _CallTimeout()


def _noop_print(*args, **kwargs):
    return None


def make_classes():
    """Fresh Suit/Card classes per check, so guess code cannot leak state across checks."""

    class Suit(enum.Enum):
        HEARTS = SUIT_SPECS[0][1]
        DIAMONDS = SUIT_SPECS[1][1]
        CLUBS = SUIT_SPECS[2][1]
        SPADES = SUIT_SPECS[3][1]

        def __init__(self, suit_name, symbol, color):
            self.suit_name = suit_name
            self.symbol = symbol
            self.color = color

    @dataclasses.dataclass(frozen=True)
    class Card:
        rank: int
        suit: Suit

        @property
        def color(self):
            return self.suit.color

        @property
        def rank_name(self):
            return {1: "A", 11: "J", 12: "Q", 13: "K"}.get(self.rank, str(self.rank))

        def __str__(self):
            return f"{self.rank_name}{self.suit.symbol}"

    Card.__qualname__ = "Card"
    Suit.__qualname__ = "Suit"
    # Rank-major universe (section 1.1): A-hearts A-diamonds A-clubs A-spades 2-hearts ...
    cards = [Card(rank, suit) for rank in range(1, 14) for suit in Suit]
    return Card, cards


def make_globals(card_cls):
    builtins = {
        "bool": bool, "int": int, "str": str, "list": list, "tuple": tuple, "set": set,
        "dict": dict, "range": range, "reversed": reversed, "sorted": sorted,
        "enumerate": enumerate, "zip": zip, "len": len, "sum": sum, "min": min, "max": max,
        "abs": abs, "any": any, "all": all, "round": round, "divmod": divmod,
        "print": _noop_print,
    }
    return {"__builtins__": builtins, "Card": card_cls}


def wrap(code):
    return "\ndef evaluate_rule(card, mainline):\n" + textwrap.indent(code, "    ") + "\n"


def op_compile(req):
    code = req.get("code")
    if not isinstance(code, str):
        return {"ok": False, "error": "code must be a string"}
    try:
        code_obj = compile(wrap(code), "<string>", "exec")
    except BaseException as e:  # SyntaxError, ValueError (NUL bytes), MemoryError ...
        return {"ok": False, "error": str(e)}
    if not req.get("load", True):
        return {"ok": True}
    card_cls, cards = make_classes()
    namespace = {}
    try:
        exec(code_obj, make_globals(card_cls), namespace)
        fn = namespace["evaluate_rule"]
    except BaseException as e:
        return {"ok": False, "error": str(e)}
    S.fn = fn
    S.cards = cards
    return {"ok": True}


def _describe(e):
    text = type(e).__name__
    try:
        msg = str(e)
    except BaseException:
        msg = "<unprintable>"
    if msg:
        text += ": " + msg
    return text[:300]


def op_eval(req):
    fn, cards = S.fn, S.cards
    if fn is None:
        return {"ok": False, "error": "no compiled rule"}
    limit = float(req.get("time_limit_s", 10.0))
    S.deadline = time.monotonic() + limit
    S.tick_limit = max(1, int(math.ceil(float(req.get("call_cpu_s", 0.25)) / TICK_S)))
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu_used = used.ru_utime + used.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(math.ceil(cpu_used + limit)) + 2
    if hard != resource.RLIM_INFINITY and soft > hard:
        soft = hard
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    results = []
    errors = []
    aborted = False
    signal.setitimer(signal.ITIMER_PROF, TICK_S, TICK_S)
    # Guarding covers the whole batch: the loop below triggers no audited event itself.
    st_ = S
    seq = st_.call_seq
    S.guarding = True
    try:
        for st in req["states"]:
            mainline = [cards[i] for i in st["m"]]
            copy = mainline.copy  # a fresh copy per call: the guess may mutate it
            out = []
            emit = out.append
            exc = False
            for i, card in enumerate(cards):
                seq += 1
                st_.call_seq = seq
                try:
                    g = True if fn(card, copy()) else False
                except _Deadline:
                    raise
                except BaseException as e:  # includes _CallTimeout and MemoryError
                    code = "T" if isinstance(e, _CallTimeout) else "M" if isinstance(e, MemoryError) else "E"
                    emit(code)
                    exc = True
                    if len(errors) < MAX_ERRORS:
                        what = "timeout: per-call CPU limit exceeded" if code == "T" else _describe(e)
                        errors.append([len(results), i, what])
                    continue
                emit("1" if g else "0")
            results.append("".join(out))
            if exc:
                break  # a state where the guess raised ends the check (section 3.3)
    except _Deadline:
        aborted = True
    finally:
        S.guarding = False
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
    return {"ok": True, "results": results, "errors": errors, "deadline": aborted}


def set_limits(mem_bytes):
    maxfd = 1024
    try:
        maxfd = os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        pass
    os.closerange(3, max(3, min(maxfd, 65536)))
    limits = [
        (resource.RLIMIT_NOFILE, 8),
        (resource.RLIMIT_FSIZE, 0),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NPROC, 0),
    ]
    if mem_bytes > 0:
        limits.append((resource.RLIMIT_AS, mem_bytes))
    applied = {}
    for res, value in limits:
        try:
            _, hard = resource.getrlimit(res)
            if hard != resource.RLIM_INFINITY and value > hard:
                value = hard
            resource.setrlimit(res, (value, value))
            applied[str(res)] = value
        except (ValueError, OSError):
            applied[str(res)] = None
    return applied


def send(obj):
    sys.stdout.buffer.write(json.dumps(obj).encode("ascii") + b"\n")
    sys.stdout.buffer.flush()


def main():
    mem = int(sys.argv[1]) if len(sys.argv) > 1 else 512 * 1024 * 1024
    if "" in sys.path:
        sys.path.remove("")
    applied = set_limits(mem)
    signal.signal(signal.SIGPROF, _on_tick)
    _, cards = make_classes()
    sys.addaudithook(_audit)
    send({
        "hello": WORKER_VERSION,
        "python": sys.version.split()[0],
        "hash_seed_fixed": sys.flags.hash_randomization == 0,
        "universe": [str(c) for c in cards],
        "limits": applied,
    })
    ops = {"compile": op_compile, "eval": op_eval}
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        rid = None
        try:
            req = json.loads(line.decode("utf-8"))
            rid = req.get("id")
            handler = ops.get(req.get("op"))
            if handler is None:
                reply = {"ok": False, "error": "unknown op"}
            else:
                reply = handler(req)
        except Exception as e:  # a malformed request must not kill the worker
            reply = {"ok": False, "error": "bad request: " + _describe(e)}
        reply["id"] = rid
        send(reply)


if __name__ == "__main__":
    main()
