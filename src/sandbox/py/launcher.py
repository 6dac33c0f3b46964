# evalgrid weirdml launcher: the last step before a submission runs. It applies the
# resource limits, optionally leaves the caller's session, sets no_new_privs, drops root
# to the per-run sandbox uid (or empties the capability bounding set) and execs the real
# command. Config: one JSON argument.
#
# With "collect" (bubblewrap, where /workspace is a size-capped tmpfs that dies with the
# sandbox), it forks instead: the child sends its stderr to stdout and execs the command;
# the parent waits for it, reads the result file without following symlinks, writes it to
# its own stderr (a separate pipe to evalgrid) behind one header line, and exits with the
# child's status (128 + signal when it was killed).
import json
import os
import resource
import stat
import sys

HEADER = b"EVALGRID-COLLECT "


def read_result(rel, cap):
    """(kind, reason, bytes): kind is present, missing or invalid; mirrors evalgrid's
    host-side reader (no symlinks in any component, regular file, at most cap bytes)."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return "invalid", "bad predictions path %r" % rel, b""
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, name in enumerate(parts):
            last = i + 1 == len(parts)
            shown = "/".join(parts[: i + 1])
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return "missing", "", b""
            except OSError as e:
                return "invalid", "cannot stat %s: %s" % (rel, e.strerror), b""
            if stat.S_ISLNK(st.st_mode):
                return "invalid", "%s is a symlink" % shown, b""
            if last and not stat.S_ISREG(st.st_mode):
                return "invalid", "%s is not a regular file" % rel, b""
            if not last and not stat.S_ISDIR(st.st_mode):
                return "missing", "", b""
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
            if not last:
                flags |= os.O_DIRECTORY
            try:
                nfd = os.open(name, flags, dir_fd=fd)
            except OSError as e:
                return "invalid", "cannot open %s: %s" % (rel, e.strerror), b""
            os.close(fd)
            fd = nfd
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "invalid", "%s is not a regular file" % rel, b""
        if st.st_size > cap:
            return "invalid", "%s is larger than %d bytes" % (rel, cap), b""
        chunks, total = [], 0
        while total <= cap:
            b = os.read(fd, min(1 << 20, cap + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
        if total > cap:
            return "invalid", "%s is larger than %d bytes" % (rel, cap), b""
        return "present", "", b"".join(chunks)
    except OSError as e:
        return "invalid", "cannot read %s: %s" % (rel, e.strerror), b""
    finally:
        os.close(fd)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def supervise(pid, collect, drop):
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if drop:
        # Only now (the command has exited) become its uid, to read its file as it could.
        os.setgroups([])
        os.setresgid(drop["gid"], drop["gid"], drop["gid"])
        os.setresuid(drop["uid"], drop["uid"], drop["uid"])
    kind, reason, data = read_result(collect["path"], int(collect["cap"]))
    head = HEADER + kind.encode() + b" " + reason.replace("\n", " ").encode("utf-8", "replace") + b"\n"
    try:
        write_all(2, head + data)
    except OSError:
        pass
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 125)


def main():
    cfg = json.loads(sys.argv[1])
    if cfg.get("setsid"):
        try:
            os.setsid()
        except OSError:
            pass
    inf = resource.RLIM_INFINITY
    for name, soft, hard in cfg["rlimits"]:
        res = getattr(resource, name)
        soft = inf if soft < 0 else soft
        hard = inf if hard < 0 else hard
        _, cur_hard = resource.getrlimit(res)
        if cur_hard != inf:
            # Never ask for more than the current hard limit (only root could raise it).
            hard = cur_hard if hard == inf else min(hard, cur_hard)
            soft = hard if soft == inf else min(soft, hard)
        resource.setrlimit(res, (soft, hard))
    if cfg.get("no_new_privs") or cfg.get("clear_bounding_set"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if cfg.get("clear_bounding_set"):
                # Root without a uid drop: an empty bounding set leaves the exec'd program
                # with no capabilities (PR_CAPBSET_DROP; EPERM for non-root is fine).
                for cap in range(64):
                    libc.prctl(24, cap, 0, 0, 0)
            if cfg.get("no_new_privs"):
                libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        except Exception:
            pass
    drop = cfg.get("drop")
    collect = cfg.get("collect")
    if collect:
        sys.stdout.flush()
        pid = os.fork()
        if pid:
            supervise(pid, collect, drop)
        # The command never holds the collect pipe: its stderr joins its stdout.
        os.dup2(1, 2)
    if drop:
        uid, gid = drop["uid"], drop["gid"]
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
            raise SystemExit("privilege drop did not take effect")
    argv = cfg["argv"]
    os.execve(argv[0], argv, cfg["env"])


try:
    main()
except BaseException as e:  # noqa: BLE001 - report anything, then fail distinctly
    sys.stderr.write("evalgrid-launcher: %r\n" % (e,))
    sys.stderr.flush()
    os._exit(125)
