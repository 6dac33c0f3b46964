"""Reads evalgrid's exports with the tools they are for (tests/it/export.rs).

    export_peer.py inspect DIR          every *.json listed by list_eval_logs, through
                                        `inspect log dump` and inspect_ai.log.read_eval_log
    export_peer.py eee DIR SCHEMA_DIR   every aggregate and instance file validated against
                                        Every Eval Ever's JSON Schemas (Draft 7, `jsonschema`)

Prints one JSON object: the scored rows as [model, task, seed, item, metric, value] and the
peer's version. Exit 3 when the peer is not installed, 1 on any rejected file.
"""

import glob
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys


def view_listing(root, files):
    """`inspect view`'s log listing, by its own code: the `computeLogsWithRetried` of the
    installed viewer (inspect_ai/_view/dist/assets/index.js) run by node over each file's
    name, task_id and status. Returns the names it lists without "Show Retried Logs", or
    None (with a note) when node or the function is missing."""
    import inspect_ai
    from inspect_ai.log import read_eval_log

    bundle = os.path.join(os.path.dirname(inspect_ai.__file__), "_view", "dist", "assets", "index.js")
    node = shutil.which("node")
    source = open(bundle, encoding="utf-8").read() if os.path.exists(bundle) else ""
    found = re.search(r"var isActiveStatus = .*?\n\};\n", source, re.S)
    if node is None or found is None:
        print("NOTE: inspect view's listing not checked (no node, or no computeLogsWithRetried)", file=sys.stderr)
        return None
    rows = []
    for path in files:
        header = read_eval_log(path, header_only=True)
        rows.append({"name": os.path.relpath(path, root), "task_id": header.eval.task_id, "status": header.status})
    script = found.group(0) + "\nconst rows = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n" + "console.log(JSON.stringify(computeLogsWithRetried(rows).filter((r) => !r.retried).map((r) => r.name)));\n"
    listed = subprocess.run([node, "-e", script], input=json.dumps(rows), capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def inspect_rows(root):
    try:
        import inspect_ai
        from click.testing import CliRunner
        from inspect_ai._cli.log import log_command
        from inspect_ai.log import list_eval_logs, read_eval_log
    except ImportError as e:
        print(f"inspect_ai missing: {e}")
        sys.exit(3)
    rows, unscored, details, files = [], [], [], sorted(glob.glob(os.path.join(root, "*.json")))
    # `inspect view` finds the logs: Inspect's own listing sees every file.
    assert len(list_eval_logs(root)) == len(files), "list_eval_logs misses logs (file names)"
    # ... and lists each one: no two logs share a task_id, so none is taken for a retry.
    listed = view_listing(root, files)
    if listed is not None:
        hidden = sorted(set(os.path.relpath(f, root) for f in files) - set(listed))
        assert not hidden, f"inspect view lists {len(listed)} of {len(files)} logs; retried: {hidden}"
    # `inspect log dump FILE`, its command run in this process (one Python start-up, not
    # one per file); the first file also through the real `inspect` executable.
    first = subprocess.run([sys.executable, "-m", "inspect_ai", "log", "dump", files[0]], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    runner = CliRunner()
    for path in files:
        dump = runner.invoke(log_command, ["dump", path])
        if dump.exit_code != 0:
            sys.exit(f"`inspect log dump {path}` failed:\n{dump.output}\n{dump.exception}")
        dumped = json.loads(dump.stdout)
        log = read_eval_log(path)
        assert log.status == "success", (path, log.status)
        assert len(log.samples) == len(dumped["samples"]) == log.results.total_samples, path
        model = log.eval.model_args["evalgrid_model"]
        for s in log.samples:
            assert s.output.completion == s.messages[-1].text, (path, s.id)
            for name, score in s.scores.items():
                if isinstance(score.value, float) and math.isnan(score.value):
                    # Unscored (Score.unscored): no value in items.csv, but the reason is said.
                    assert score.reason == "grader_failed" and score.explanation.startswith("Grade not found"), (path, s.id, score)
                    unscored.append([model, log.eval.dataset.name, s.metadata["seed"], str(s.id), name, score.explanation])
                    continue
                rows.append([model, log.eval.dataset.name, s.metadata["seed"], str(s.id), name, score.value])
                details.append([model, str(s.id), s.metadata["seed"], name, score.answer, score.explanation])
        for score in log.results.scores:
            values = [v for v in (s.scores[score.name].value for s in log.samples if score.name in s.scores) if not (isinstance(v, float) and math.isnan(v))]
            assert abs(score.metrics["mean"].value - sum(values) / len(values)) < 1e-12, (path, score.name)
    return {
        "peer": f"inspect_ai {inspect_ai.__version__}",
        "files": len(files),
        "listed": None if listed is None else len(listed),
        "rows": rows,
        "unscored": unscored,
        "details": details,
    }


def eee_rows(root, schemas):
    try:
        import jsonschema
        from jsonschema import Draft7Validator
    except ImportError as e:
        print(f"jsonschema missing: {e}")
        sys.exit(3)
    load = lambda name: Draft7Validator(json.load(open(os.path.join(schemas, name))))
    aggregate, instance = load("eval.schema.json"), load("instance_level_eval.schema.json")
    rows, files = [], sorted(glob.glob(os.path.join(root, "data", "**", "*.json"), recursive=True))
    for path in files:
        log = json.load(open(path))
        errors = [f"{list(e.path)}: {e.message}" for e in aggregate.iter_errors(log)]
        assert not errors, (path, errors)
        detail = log["detailed_evaluation_results"]
        body = open(os.path.join(root, detail["file_path"]), "rb").read()
        assert hashlib.sha256(body).hexdigest() == detail["checksum"], path
        lines = body.decode().splitlines()
        assert len(lines) == detail["total_rows"], path
        model = log["model_info"]["additional_details"]["evalgrid_model"]
        per_result = {}
        for line in lines:
            record = json.loads(line)
            errors = [f"{list(e.path)}: {e.message}" for e in instance.iter_errors(record)]
            assert not errors, (detail["file_path"], errors)
            assert record["evaluation_id"] == log["evaluation_id"], path
            metric = record["evaluation_result_id"].rsplit("/", 1)[1]
            meta = record["metadata"]
            score = record["evaluation"]["score"]
            per_result.setdefault(record["evaluation_result_id"], []).append(score)
            task = log["evaluation_results"][0]["source_data"]["dataset_name"]
            rows.append([model, task, int(meta["seed"]), str(meta["item"]), metric, score])
        for result in log["evaluation_results"]:
            values = per_result[result["evaluation_result_id"]]
            assert abs(result["score_details"]["score"] - sum(values) / len(values)) < 1e-12, path
    from importlib.metadata import version
    return {"peer": f"jsonschema {version('jsonschema')}", "files": len(files), "rows": rows}


if __name__ == "__main__":
    mode, root = sys.argv[1], sys.argv[2]
    out = inspect_rows(root) if mode == "inspect" else eee_rows(root, sys.argv[3])
    print(json.dumps(out))
