"""lm-evaluation-harness's own view of an lm-eval task file, for tests/it/qa_lm_eval.rs.

Reads the task file with lm-eval's `ConfigurableTask` (its dataset through `datasets`, from the
local file), and prints one JSON line per document: the prompt (`doc_to_text`), the gold, and
lm-eval's own metric values, computed by `process_results` from the inputs the test recorded:
for multiple_choice, each choice's log-likelihood (from the recorded next-token alternatives);
for generate_until, the recorded answer passed through the task's own filter ensembles.

usage: qa_lm_eval.py TASK.yaml RECORDED.json   (run in the task file's folder)
Prints SKIPPED and exits 0 when lm-eval (or `datasets`) cannot be imported.
"""

import json
import math
import os
import sys

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
try:
    import yaml
    from lm_eval.api.instance import Instance
    from lm_eval.api.task import ConfigurableTask
except Exception as e:  # noqa: BLE001 - any import failure means the peer is missing
    print(f"SKIPPED: lm-eval is not importable ({type(e).__name__}: {e})")
    sys.exit(0)


def main():
    config = yaml.safe_load(open(sys.argv[1]))
    recorded = json.load(open(sys.argv[2]))
    task = ConfigurableTask(config=config)
    docs = list(task.test_docs() if task.has_test_docs() else task.validation_docs())
    for i, doc in enumerate(docs):
        prompt = task.doc_to_text(doc)
        row = {"index": i, "prompt": prompt}
        if task.OUTPUT_TYPE == "multiple_choice":
            choices = task.doc_to_choice(doc)
            top = recorded[prompt]
            # Each choice's log-likelihood as the next token: evalgrid's reading of the
            # recorded alternatives (the best whose stripped text is the choice; else -inf).
            lls = []
            for c in choices:
                found = [t["logprob"] for t in top if t["token"].strip() == c.strip()]
                lls.append(max(found) if found else -math.inf)
            results = task.process_results(doc, [(ll, False) for ll in lls])
            row.update({"gold": task.doc_to_target(doc), "lls": [None if math.isinf(x) else x for x in lls]})
            row.update({k: float(v) for k, v in results.items()})
        else:
            answer = recorded[prompt]
            for ensemble in task._filters:
                inst = Instance(request_type="generate_until", doc=doc, arguments=(prompt, {}), idx=0)
                inst.resps = [answer]
                ensemble.apply([inst])
                filtered = inst.filtered_resps[ensemble.name]
                results = task.process_results(doc, [filtered])
                row[ensemble.name] = {k: float(v) for k, v in results.items()}
                row[ensemble.name]["filtered"] = filtered
        print(json.dumps(row))


main()
