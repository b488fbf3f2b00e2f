"""Reading the files FollowBench's reference code writes (code/ and code_zh/ of YJiangcm/FollowBench).

Both kinds are JSON Lines of `{"prompt_new": ..., "choices": [{"message": {"content": ...}}]}`:
- the model's answers, `api_output/<model>_<category>_constraint.jsonl` or
  `api_output/<model>/<category>_constraint.jsonl`: the prompt is the row's instruction, the content is
  the answer. English answers may name the prompt `prompt` instead: code/model_inference_vllm.py writes
  `prompt`, and code/utils.py (`data_match_api_output`, line 40 at the pinned commit) matches on it,
  while code/model_inference.py and code_zh write `prompt_new`. Either is accepted; a line with both
  uses the one its language's matcher reads (`prompt` in English, `prompt_new` in Chinese);
- the judge's replies, `gpt4_discriminative_eval_output/<model>_<category>_constraint.jsonl`, or
  `<out>/<model>/<category>_constraint.jsonl` as llm_eval.py lays them out: `prompt_new` is the judge
  prompt, the content the judge's reply.

Like the reference (utils.data_match_api_output, discriminative_evaluation), an answer is found by its
instruction text and a judge reply by its prompt text, the first matching line winning. The judge prompt
is rebuilt from the instance and the answer; ours is the reference's byte for byte, so an unchanged
prompt finds its reply. The data is needed: the answer files hold no level, source or target.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ifsweep.benchmarks._files import iter_json_lines, typed_field
from ifsweep.benchmarks.followbench._load import CATEGORIES, language_of, load
from ifsweep.benchmarks.followbench._prompts import judge_prompt
from ifsweep.benchmarks.records import DataError, ImportedResult, Instance, ScoringMode

# The reference's scripts call the situation category "scenario" in their file names.
_ALIASES = {"scenario": "situation"}
_NAME = re.compile(
    r"^(?:(?P<model>.+)_)?(?P<category>" + "|".join((*CATEGORIES, *_ALIASES)) + r")_constraint$"
)


def model_and_category(path: Path) -> tuple[str, str]:
    """<model>_<category>_constraint.jsonl, or <model>/<category>_constraint.jsonl."""
    match = _NAME.match(path.name.removesuffix(".jsonl").removesuffix(".json"))
    if match is None:
        raise DataError(
            str(path),
            "cannot tell the model and category from the file name "
            "(expected <model>_<category>_constraint.jsonl or <model>/<category>_constraint.jsonl)",
        )
    category = match.group("category")
    model = match.group("model") or path.resolve().parent.name
    return model, _ALIASES.get(category, category)


def _prompt(path: Path, line: int, obj: Mapping[str, Any], language: str) -> str:
    names = ("prompt", "prompt_new") if language == "en" else ("prompt_new", "prompt")
    for name in names:
        if name in obj:
            prompt: str = typed_field(path, line, obj, name, str)
            return prompt
    raise DataError(
        str(path), "missing (the reference writes 'prompt_new' or 'prompt')", record=line, field="prompt_new"
    )


def _content(path: Path, line: int, obj: Mapping[str, Any], language: str) -> tuple[str, str]:
    prompt = _prompt(path, line, obj, language)
    choices = obj.get("choices")
    try:
        content = choices[0]["message"]["content"]  # type: ignore[index]
    except (TypeError, KeyError, IndexError):
        raise DataError(
            str(path), "expected [{'message': {'content': ...}}]", record=line, field="choices"
        ) from None
    if not isinstance(content, str):
        # The reference writes JSON null when its model call returned nothing: an empty answer.
        if content is not None:
            raise DataError(str(path), "content is not a string", record=line, field="choices")
        content = ""
    return prompt, content


def read_lines(path: Path, language: str) -> Iterator[tuple[str, str]]:
    """(prompt, content) of every line, in file order. Line numbers in errors are 1-based."""
    for line, obj in iter_json_lines(path):
        yield _content(path, line, obj, language)


@dataclass(slots=True)
class _ModelFiles:
    # (category, prompt_new) -> content; the first line wins, as in the reference's matching loops.
    texts: dict[tuple[str, str], str] = field(default_factory=dict)


def read_reference_outputs(
    paths: list[Path], data_dir: Path | None, options: Mapping[str, Any], mode: ScoringMode = "paper"
) -> Iterator[ImportedResult]:
    """One result per (model, instance) whose answer is in the given files, with the judge's reply to
    the rebuilt judge prompt when a judge file holds it. Instances are in data order per model."""
    if data_dir is None:
        raise ValueError("importing FollowBench outputs needs the data (--data): the files hold no levels")
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*_constraint.json*") if p.is_file())
        else:
            files.append(path)
    language = language_of(data_dir, options)
    by_model: dict[str, _ModelFiles] = {}
    for path in files:
        model, category = model_and_category(path)
        texts = by_model.setdefault(model, _ModelFiles()).texts
        for prompt, content in read_lines(path, language):
            texts.setdefault((category, prompt), content)
    instances = list(load(data_dir, options))
    for model, mf in by_model.items():
        for instance in instances:
            yield from _result(model, mf, instance)


def _result(model: str, mf: _ModelFiles, instance: Instance) -> Iterator[ImportedResult]:
    category = instance.category or ""
    answer = mf.texts.get((category, instance.messages[-1].content))
    if answer is None:
        return
    replies: dict[tuple[int, int], str] = {}
    path = tuple(instance.meta.get("evolution_path", ()))
    if len(path) >= 2:
        prompt = judge_prompt(category, path, answer, str(instance.meta.get("language", "en")))
        reply = mf.texts.get((category, prompt))
        if reply is not None:
            replies[(0, 0)] = reply
    yield ImportedResult(model=model, instance=instance, response=answer, replies=replies)
