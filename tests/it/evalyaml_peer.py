"""Inspect AI runs an eval.yaml task on local files, for evalgrid's eval.yaml differential test.

Usage: evalyaml_peer.py EVAL_YAML DATASET_JSONL REPLIES_JSON [TASK_ID]

Builds the task the way Inspect's Hub loader (`inspect_ai/_eval/task/hf.py`) does: the same
`HFTask` validation, `_record_to_sample_hf` field mapping, `solver_from_spec` and
`scorer_from_spec`; only the dataset comes from a local JSONL file instead of the Hub. The
model is a replay: it answers with the reply of the first rule of REPLIES_JSON
(`{"replies": [{"contains", "reply"}], "default"}`) whose `contains` occurs in the last user
message, as evalgrid's recorded answers. Prints one JSON list, one entry per sample in file
order: {"system": text or null, "user": text, "scores": {scorer: value}} (C = 1, I = N = 0).
Exit 3 when inspect_ai is missing (the Rust test prints SKIPPED).
"""
import json
import sys
import tempfile

try:
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai._eval.loader import scorer_from_spec, solver_from_spec
    from inspect_ai._eval.task.hf import HFTask, _load_eval_yaml, _record_to_sample_hf
    from inspect_ai.dataset import MemoryDataset
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, ModelAPI, ModelOutput, modelapi
    from inspect_ai.scorer._scorer import ScorerSpec
    from inspect_ai.solver._solver import SolverSpec
except ImportError as e:  # pragma: no cover
    print(f"missing: {e}")
    sys.exit(3)

REPLIES = json.load(open(sys.argv[3]))


def text_of(message):
    return message.text if hasattr(message, "text") else str(message.content)


@modelapi(name="replay")
def replay():
    class Replay(ModelAPI):
        def __init__(self, model_name, base_url=None, api_key=None, config=GenerateConfig(), **kwargs):
            super().__init__(model_name=model_name, base_url=base_url, api_key=api_key, config=config)

        async def generate(self, input, tools, tool_choice, config):
            user = [m for m in input if isinstance(m, ChatMessageUser)][-1]
            text = text_of(user)
            reply = next((r["reply"] for r in REPLIES.get("replies", []) if r["contains"] in text), REPLIES.get("default", ""))
            return ModelOutput.from_content(self.model_name, reply)

    return Replay


def value(v):
    if v == "C":
        return 1.0
    if v in ("I", "N"):
        return 0.0
    return float(v)


def main():
    config = _load_eval_yaml(sys.argv[1])
    wanted = sys.argv[4] if len(sys.argv) > 4 else None
    tasks = [HFTask.model_validate(t) for t in config["tasks"]]
    hf = next(t for t in tasks if wanted is None or t.id == wanted)
    records = [json.loads(line) for line in open(sys.argv[2], encoding="utf-8") if line.strip()]
    samples = [_record_to_sample_hf(r, hf.field_spec) for r in records]
    for i, s in enumerate(samples):
        s.id = i
    solvers = [solver_from_spec(SolverSpec(solver=s.name, args=s.args, args_passed=s.args)) for s in hf.solvers]
    scorers = [scorer_from_spec(ScorerSpec(scorer=s.name), task_path=None, **s.args) for s in hf.scorers]
    task = Task(dataset=MemoryDataset(samples), solver=solvers, scorer=scorers)
    with tempfile.TemporaryDirectory() as logs:
        [log] = inspect_eval(task, model="replay/recorded", log_dir=logs, display="none", max_connections=1)
        assert log.status == "success", log.error
        samples = sorted(log.samples, key=lambda s: s.id)
    out = []
    for sample in samples:
        system = [text_of(m) for m in sample.messages if isinstance(m, ChatMessageSystem)]
        user = [text_of(m) for m in sample.messages if isinstance(m, ChatMessageUser)]
        out.append({
            "system": system[0] if system else None,
            "user": user[-1],
            "scores": {name: value(score.value) for name, score in sample.scores.items()},
        })
    print(json.dumps(out))


main()
