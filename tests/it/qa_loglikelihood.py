"""lm-evaluation-harness's own loglikelihood scoring of an lm-eval task file, for
tests/it/qa_loglikelihood.rs.

Reads the task with lm-eval's `ConfigurableTask`, builds each document's requests with its
own `construct_requests` (context, `target_delimiter` + choice), sends them with its own `gguf`
model (`GGUFLM.loglikelihood`: `/v1/completions` with `echo`, split at `text_offset`) to the
server at BASE, and scores them with its own `process_results`. Prints one JSON line per
document: the log-likelihoods, acc and acc_norm.

usage: qa_loglikelihood.py TASK.yaml BASE   (run in the task file's folder)
Prints SKIPPED and exits 0 when lm-eval (or `datasets`) cannot be imported.
"""

import json
import os
import sys

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
try:
    import yaml
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.models.gguf import GGUFLM
except Exception as e:  # noqa: BLE001 - any import failure means the peer is missing
    print(f"SKIPPED: lm-eval is not importable ({type(e).__name__}: {e})")
    sys.exit(0)


def main():
    config = yaml.safe_load(open(sys.argv[1]))
    task = ConfigurableTask(config=config)
    lm = GGUFLM(base_url=sys.argv[2])
    docs = list(task.test_docs() if task.has_test_docs() else task.validation_docs())
    for i, doc in enumerate(docs):
        ctx = task.doc_to_text(doc)
        requests = task.construct_requests(doc, ctx, metadata=(task.config.task, i, 1))
        results = lm.loglikelihood(requests, disable_tqdm=True)
        scores = task.process_results(doc, results)
        print(json.dumps({"index": i, "lls": [r[0] for r in results], **{k: float(v) for k, v in scores.items()}}))


main()
