"""Plain records shared by every benchmark: what an instance is, what a judge is asked, what it decided.

These are the only benchmark values that cross a stage boundary. They are frozen and hold no I/O,
so the runner can cache, hash and resume them, and tests can build them by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant"]
ScoringMode = Literal["paper", "reference"]
Source = Literal["rule", "judge"]
Priority = Literal["primary", "secondary"]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True, slots=True)
class Constraint:
    """One scored unit: a FollowBench added constraint, an InFoBench question, a CFBench checklist item,
    an EIFBench scoring question. `idx` is its position within the instance (0-based, dense)."""

    idx: int
    type: str | None = None
    priority: Priority | None = None
    text: str = ""
    instruction_idx: int | None = None  # EIFBench: which sub-instruction it belongs to


@dataclass(frozen=True, slots=True)
class Instance:
    benchmark: str
    instance_id: str
    group_id: str
    messages: tuple[Message, ...]
    constraints: tuple[Constraint, ...]
    level: int | None = None
    category: str | None = None
    split: str | None = None
    # Benchmark-specific extras the scorer needs (FollowBench evolution path, targets, CFBench gold answer).
    meta: Mapping[str, Any] = field(default_factory=dict)


# The first line of every re-ask follow-up (our own wording). The simulator recognises a follow-up by it.
REASK_LEAD = "Your reply above could not be read: it is not in the required format."
_REASK_DEFAULT_RULE = "Answer the request above again, in exactly the output format it asks for."


@dataclass(frozen=True, slots=True)
class JudgeTurn:
    """One user message to the judge, and which constraints its reply decides (in reply order).
    `reask`: the benchmark's own format rule, quoted in the follow-up sent after an unparsed reply."""

    user: str
    constraint_idxs: tuple[int, ...]
    reask: str | None = None


def reask_message(turn: JudgeTurn) -> Message:
    """The user message that follows an unparsed reply to `turn`: the lead, then the format rule."""
    return Message("user", f"{REASK_LEAD}\n\n{turn.reask or _REASK_DEFAULT_RULE}")


@dataclass(frozen=True, slots=True)
class JudgeTask:
    """A judge conversation. Turn i is sent with the system message, every earlier turn and the
    judge's earlier replies in context (InFoBench's protocol); most tasks have a single turn."""

    task_idx: int
    turns: tuple[JudgeTurn, ...]
    system: str | None = None
    # An audit task judges constraints a rule decides (FollowBench's audit_rule_items): its verdicts are
    # stored as rows of source "audit", beside the rule's, and no metric reads them.
    audit: bool = False

    def messages_for_turn(self, turn_idx: int, earlier_replies: tuple[str, ...]) -> tuple[Message, ...]:
        if len(earlier_replies) != turn_idx:
            raise ValueError(f"turn {turn_idx} needs {turn_idx} earlier replies, got {len(earlier_replies)}")
        out: list[Message] = []
        if self.system is not None:
            out.append(Message("system", self.system))
        for i in range(turn_idx):
            out.append(Message("user", self.turns[i].user))
            out.append(Message("assistant", earlier_replies[i]))
        out.append(Message("user", self.turns[turn_idx].user))
        return tuple(out)

    def messages_for_ask(
        self, turn_idx: int, earlier_replies: tuple[str, ...], unparsed: tuple[str, ...]
    ) -> tuple[Message, ...]:
        """Ask `len(unparsed)` of a turn: the turn's messages, then each unparsed reply to it followed by
        the re-ask follow-up, so the judge sees what it answered and the rule it missed."""
        out = list(self.messages_for_turn(turn_idx, earlier_replies))
        follow_up = reask_message(self.turns[turn_idx])
        for reply in unparsed:
            out += [Message("assistant", reply), follow_up]
        return tuple(out)


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """A parsed judge reply. `values` has one entry per constraint of the turn (None: undecided), or is
    None when the reply could not be parsed at all. `stop` ends the conversation early (the reference
    InFoBench protocol stops at the first unclear reply)."""

    values: tuple[bool | None, ...] | None
    stop: bool = False

    @property
    def parsed(self) -> bool:
        return self.values is not None


@dataclass(frozen=True, slots=True)
class Plan:
    """How one response is scored: constraints decided by rules now, the rest by judge tasks."""

    rule_values: Mapping[int, bool | None]
    judge_tasks: tuple[JudgeTask, ...]


class DataError(ValueError):
    """A benchmark file that does not match its schema. The message names file, record and field."""

    def __init__(self, path: str, message: str, *, record: int | None = None, field: str | None = None):
        where = path
        if record is not None:
            where += f": record {record}"
        if field is not None:
            where += f": field '{field}'"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.record = record
        self.field = field


@dataclass(frozen=True, slots=True)
class ImportedResult:
    """One model's answer to one instance, with the judge replies a reference tool stored for it.
    `replies[(task_idx, turn_idx)]` is the judge's reply to that turn of `plan(...).judge_tasks`.
    `unscored`: constraints the reference's scoring leaves out (EIFBench's 8_metric.py skips a point
    without a reply); a reference-mode import gives them no row instead of an error."""

    model: str
    instance: Instance
    response: str
    replies: Mapping[tuple[int, int], str]
    unscored: frozenset[int] = frozenset()
