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
# empty temp dir. This process is a zygote (see main): it never runs guess code, and forks
# one fresh child per check. The child takes its own uid (where evalgrid runs as root),
# session and limits, closes inherited fds, becomes non-dumpable, sets rlimits (address
# space, CPU, open files, processes, file size, core) and installs an audit hook that refuses
# every audited event (open, os.*, subprocess, socket, import, exec, compile ...) while guess
# code runs; the zygote kills it when the check ends. Per-call CPU timeouts come from an
# ITIMER_PROF timer; the parent kills everything on a wall-clock overrun.

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

WORKER_VERSION = 3
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


def send(wf, obj):
    wf.write(json.dumps(obj).encode("ascii") + b"\n")
    wf.flush()


def serve(mem):
    """One check in a fresh child: limits, timer and audit hook, then requests until EOF."""
    if "" in sys.path:
        sys.path.remove("")
    # Fresh buffers: the zygote's own reader may hold bytes that are not ours.
    rf = open(0, "rb", buffering=1 << 16, closefd=False)
    wf = open(1, "wb", buffering=1 << 16, closefd=False)
    set_limits(mem)
    signal.signal(signal.SIGPROF, _on_tick)
    sys.addaudithook(_audit)
    ops = {"compile": op_compile, "eval": op_eval}
    while True:
        line = rf.readline()
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
        send(wf, reply)


# ---- zygote: started once, forks one fresh child per check ----------------------------
#
# Lines from evalgrid start with "z" (for the zygote: fork, end) or "c" (relayed to the
# live child); lines to evalgrid likewise ("z": hello, reaped; "c": a child's reply), so a
# child can never speak as the zygote. A child runs as its own uid (when evalgrid can drop
# root), in its own session, non-dumpable, with its own limits, fds 0/1 on a socket pair
# only it and the zygote hold; the zygote never runs guess code, kills the child (its
# whole process group) when the check ends and reports its exit status.

PR_SET_DUMPABLE = 4
MAX_RELAY_LINE = 64 << 20


def _prctl(option, value):
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except Exception:
        pass


def _child(req, sock, mem):
    try:
        os.setsid()
        os.dup2(sock, 0)
        os.dup2(sock, 1)
        uid = req.get("uid")
        if isinstance(uid, int) and uid > 0:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            if os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid):
                raise SystemExit("privilege drop did not take effect")
        # After the uid change: no ptrace of this child, no /proc/<pid> of it to other uids.
        _prctl(PR_SET_DUMPABLE, 0)
        serve(mem)
    except BaseException as e:  # noqa: BLE001 - report, never return into the zygote
        try:
            os.write(2, ("evalgrid-judge-child: %r\n" % (e,)).encode("utf-8", "replace"))
        except BaseException:
            pass
    finally:
        os._exit(0)


class _Lines:
    """Line reader over a raw fd that never reads ahead of what select() saw."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()

    def pop(self):
        nl = self.buf.find(b"\n")
        if nl < 0:
            return None
        line = bytes(self.buf[: nl + 1])
        del self.buf[: nl + 1]
        return line

    def fill(self):
        data = os.read(self.fd, 1 << 16)
        self.buf += data
        return bool(data)


def _zsend(obj):
    _write_all(1, b"z" + json.dumps(obj).encode("ascii") + b"\n")


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _relay(inp, sock_fd, pid):
    """Passes "c" lines to the child and its lines back until the check ends or it dies."""
    import select

    out = bytearray()
    while True:
        line = inp.pop()
        while line is not None:
            if line[:1] != b"c":
                inp.buf[0:0] = line  # a zygote request ends the check; handled by the caller
                return
            try:
                _write_all(sock_fd, line[1:])
            except OSError:
                pass
            line = inp.pop()
        ready, _, _ = select.select([0, sock_fd], [], [])
        if sock_fd in ready:
            data = os.read(sock_fd, 1 << 16)
            if not data:
                return
            out += data
            while True:
                nl = out.find(b"\n")
                if nl < 0:
                    break
                _write_all(1, b"c" + bytes(out[: nl + 1]))
                del out[: nl + 1]
            if len(out) > MAX_RELAY_LINE:
                return
        if 0 in ready and not inp.fill():
            os.kill(pid, signal.SIGKILL)
            os._exit(0)


def _fork_child(inp, req, mem, seq):
    import socket

    ours, theirs = socket.socketpair()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        fd = theirs.detach()
        os.closerange(3, fd)
        os.closerange(fd + 1, 65536)
        _child(req, fd, mem)
    theirs.close()
    try:
        _relay(inp, ours.fileno(), pid)
    finally:
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
            except OSError:
                pass
        ours.close()
        _, status = os.waitpid(pid, 0)
        _zsend({"reaped": seq, "status": status})


def _seal_scratch():
    """Children cannot write anywhere: /tmp and /workspace belong to the zygote, read-only
    (a child that shares the zygote's uid, where evalgrid is not root, could chmod them back)."""
    for d in ("/tmp", "/workspace"):
        try:
            if os.stat(d).st_uid == os.getuid():
                os.chmod(d, 0o555)
        except OSError:
            pass


def main():
    mem = int(sys.argv[1]) if len(sys.argv) > 1 else 512 * 1024 * 1024
    if "" in sys.path:
        sys.path.remove("")
    _prctl(PR_SET_DUMPABLE, 0)
    _seal_scratch()
    _, cards = make_classes()
    _zsend({
        "hello": WORKER_VERSION,
        "python": sys.version.split()[0],
        "hash_seed_fixed": sys.flags.hash_randomization == 0,
        "universe": [str(c) for c in cards],
    })
    inp = _Lines(0)
    while True:
        line = inp.pop()
        if line is None:
            if not inp.fill():
                return
            continue
        if line[:1] != b"z":
            continue  # a stale line for a child that is gone
        try:
            req = json.loads(line[1:].decode("utf-8"))
        except Exception:
            continue
        if req.get("op") == "fork":
            _fork_child(inp, req, mem, req.get("seq"))


if __name__ == "__main__":
    main()
