# evalgrid weirdml launcher: the last step before a submission runs. It applies the
# resource limits, optionally leaves the caller's session, sets no_new_privs, drops root
# to the per-run sandbox uid (or empties the capability bounding set) and execs the real
# command. Config: one JSON argument.
import json
import os
import resource
import sys


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
