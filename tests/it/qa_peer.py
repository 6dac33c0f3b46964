"""Inspect AI's own scorers over (answer, target) cases, for evalgrid's `qa` differential test.

Reads a JSON list of cases from the file named on the command line, each
{"scorer": name, "options": {...}, "answer": text, "targets": [...], "choices": [...],
"order": [...], "multiple_correct": bool}, runs Inspect's scorer (`match`, `includes`,
`exact`, `f1`, `pattern`, `answer`, `choice`; for `choice` the `multiple_choice` solver's
answer parsing first, with the choices in the shuffled `order`) and prints one JSON list of
values (C = 1, I = N = 0, F1 as is). Exit 3 when inspect_ai is missing (the Rust test prints
SKIPPED).
"""
import asyncio
import json
import sys

try:
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Target, answer, choice, exact, f1, includes, match, pattern
    from inspect_ai.solver import TaskState
    from inspect_ai.solver._multiple_choice import parse_answers, set_choices_based_on_generated_response
    from inspect_ai.solver._task_state import Choice, Choices
except ImportError as e:  # pragma: no cover
    print(f"missing: {e}")
    sys.exit(3)


def value(v):
    if v in ("C",):
        return 1.0
    if v in ("I", "N"):
        return 0.0
    return float(v)


async def run(case):
    name, opts = case["scorer"], case.get("options", {})
    scorer = {"match": match, "includes": includes, "exact": exact, "f1": f1, "pattern": pattern, "answer": answer, "choice": choice}[name](**opts)
    state = TaskState(model="mock/model", sample_id=0, epoch=1, input="q", messages=[], output=ModelOutput.from_content("mock/model", case["answer"]))
    if name == "choice":
        choices = case["choices"]
        order = case["order"]
        state.choices = Choices([Choice(value=choices[j], correct=None, original_position=j) for j in order])
        answers = parse_answers(state, case.get("multiple_correct", False))
        set_choices_based_on_generated_response(state, answers)
    try:
        score = await scorer(state, Target(case["targets"]))
    except ValueError as e:
        return f"error: {e}"
    return value(score.value)


async def main():
    cases = json.load(open(sys.argv[1]))
    print(json.dumps([await run(c) for c in cases]))


asyncio.run(main())
