# evalgrid's launcher for llama.cpp's server as the xllamacpp wheel ships it (it has no
# command line of its own): reads one JSON argument {model, port, n_ctx, slots, args}, maps
# the llama-server flags it knows onto xllamacpp.CommonParams, starts the server on
# 127.0.0.1:port and serves until it is killed. An unknown flag or a model the server cannot
# load exits 2 with one `error:` line; evalgrid shows the log's last lines.
import json
import sys
import time

cfg = json.loads(sys.argv[1])
try:
    import xllamacpp
except ImportError as e:
    print(f"error: cannot import xllamacpp: {e}", file=sys.stderr)
    sys.exit(3)

p = xllamacpp.CommonParams()
p.model.path = cfg["model"]
p.n_parallel = int(cfg["slots"])
p.n_ctx = int(cfg["n_ctx"])
p.use_jinja = True
p.hostnames = ["127.0.0.1"]
p.port = int(cfg["port"])
p.endpoint_metrics = True
p.warmup = False
# One thread unless told otherwise: on a busy machine more threads wait on each other.
p.cpuparams.n_threads = 1
p.cpuparams_batch.n_threads = 1


def set_threads(v):
    p.cpuparams.n_threads = int(v)


def set_batch_threads(v):
    p.cpuparams_batch.n_threads = int(v)


def set_attr(obj, name, kind):
    return lambda v: setattr(obj(), name, kind(v))


def chat_template_file(v):
    with open(v, encoding="utf-8") as f:
        p.chat_template = f.read()


# llama-server flag -> setter (flags that take a value).
VALUED = {
    "-t": set_threads,
    "--threads": set_threads,
    "-tb": set_batch_threads,
    "--threads-batch": set_batch_threads,
    "--temp": set_attr(lambda: p.sampling, "temp", float),
    "--top-k": set_attr(lambda: p.sampling, "top_k", int),
    "--top-p": set_attr(lambda: p.sampling, "top_p", float),
    "--min-p": set_attr(lambda: p.sampling, "min_p", float),
    "-s": set_attr(lambda: p.sampling, "seed", int),
    "--seed": set_attr(lambda: p.sampling, "seed", int),
    "--repeat-penalty": set_attr(lambda: p.sampling, "penalty_repeat", float),
    "--repeat-last-n": set_attr(lambda: p.sampling, "penalty_last_n", int),
    "--presence-penalty": set_attr(lambda: p.sampling, "penalty_present", float),
    "--frequency-penalty": set_attr(lambda: p.sampling, "penalty_freq", float),
    "-n": set_attr(lambda: p, "n_predict", int),
    "--n-predict": set_attr(lambda: p, "n_predict", int),
    "-b": set_attr(lambda: p, "n_batch", int),
    "--batch-size": set_attr(lambda: p, "n_batch", int),
    "-ub": set_attr(lambda: p, "n_ubatch", int),
    "--ubatch-size": set_attr(lambda: p, "n_ubatch", int),
    "-ngl": set_attr(lambda: p, "n_gpu_layers", int),
    "--gpu-layers": set_attr(lambda: p, "n_gpu_layers", int),
    "--n-gpu-layers": set_attr(lambda: p, "n_gpu_layers", int),
    "--chat-template": set_attr(lambda: p, "chat_template", str),
    "--chat-template-file": chat_template_file,
}
# Flags without a value.
FLAGS = {
    "--jinja": lambda: setattr(p, "use_jinja", True),
    "--no-jinja": lambda: setattr(p, "use_jinja", False),
    "--no-warmup": lambda: setattr(p, "warmup", False),
    "--warmup": lambda: setattr(p, "warmup", True),
    "--metrics": lambda: setattr(p, "endpoint_metrics", True),
}

args = list(cfg.get("args", []))
i = 0
while i < len(args):
    word = args[i]
    name, eq, inline = word.partition("=")
    try:
        if name in VALUED:
            if eq:
                value = inline
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                raise ValueError("needs a value")
            VALUED[name](value)
        elif name in FLAGS and not eq:
            FLAGS[name]()
        else:
            known = " ".join(sorted(list(VALUED) + list(FLAGS)))
            print(f"error: invalid argument: {word} (the xllamacpp launcher understands: {known})", file=sys.stderr)
            sys.exit(2)
    except (ValueError, OSError) as e:
        print(f"error: invalid argument: {word}: {e}", file=sys.stderr)
        sys.exit(2)
    i += 1

try:
    server = xllamacpp.Server(p)
except Exception as e:  # the server's own log lines above say why
    print(f"error: llama.cpp could not start: {e}", file=sys.stderr)
    sys.stderr.flush()
    sys.exit(2)
sys.stderr.flush()
while True:
    time.sleep(3600)
