"""What every stored result depends on, and nothing else: the content keys of generations, judge calls
and verdicts (sha256 of canonical JSON, `runner.store.shards.record_key`).

- A generation depends on the endpoint that answers (provider, base URL, the model name the provider
  sees, the send path), the params and the messages as they are sent: the params of
  `providers.send.params.sent_params` (a reasoning model's max_completion_tokens, no sampling
  parameter), the conversation of `providers.send.conversation.conversation`, the two functions every
  route builds its request from. So the key changes exactly when the request does: a reasoning
  setting that changes it is sent again on resume, and one that does not re-buys nothing. (Where the
  sent params equal the config's, as for every model but reasoning ones, keys are those of before.)
  Not on the config id or the key variable:
  two model ids on one endpoint share their answers, two on different endpoints never do.
- A judge call depends on the judge's endpoint, its params, the messages and the ask index, not on the
  instance: identical judge conversations may share a reply.
- A verdict's key names its slot: one (benchmark table, instance, model, judge, scoring), the table
  name carrying the language. A slot holds exactly one current verdict: the newest record under its key
  (every reader's rule), so a verdict derived anew, by a resume or a re-import, replaces the old one
  instead of standing beside it. What the verdict depends on is its basis, stored in the record: the
  generation, the judge's endpoint and params, the re-asks, the template version, the version of the
  code that derived it (benchmarks/versions.py) and the constraints left unscored. A stored verdict
  serves only while its basis is the current one; otherwise it is derived again from the stored replies.

KEY_SCHEMA names this scheme; run directories record it (runner.store.manifest) so that one written under an
older scheme is refused instead of silently re-buying every result.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ifsweep.providers.records import EndpointSpec
from ifsweep.providers.send.conversation import conversation, detached
from ifsweep.runner.store.shards import record_key

__all__ = [
    "KEY_SCHEMA",
    "Identity",
    "endpoint_identity",
    "generation_key",
    "judge_key",
    "older_slots",
    "verdict_basis",
    "verdict_key",
    "verdict_slot",
]

# 1: keys without the endpoint or the instance (ifsweep <= 0.1.0 before issue 12); 2: this module.
KEY_SCHEMA = 2

Identity = Mapping[str, str | None]


def endpoint_identity(spec: EndpointSpec) -> Identity:
    """Where `spec`'s requests go and under which name: what an answer depends on besides the request.
    litellm is imported only when the model string needs it to be resolved (as for sending). A spec
    with a `server_id` is named by it instead of its api_base: the same server on another port (the
    simulator restarted without --port, the demo's own) gives the same answers, hence the same keys."""
    identity = _route_identity(spec.model, spec.api_base, spec.force_litellm)
    if spec.server_id is None:
        return identity
    return {**{k: v for k, v in identity.items() if k != "api_base"}, "server": spec.server_id}


@functools.cache
def _route_identity(model: str, api_base: str | None, force_litellm: bool) -> Identity:
    # Cached: the partition filter asks for every pair, and resolving may consult litellm. Imported
    # here: the pool brings asyncio and the rate limiters, which a reader of a run (status) never needs.
    from ifsweep.providers.pool import resolve_route

    route = resolve_route(EndpointSpec(label="", model=model, api_base=api_base, force_litellm=force_litellm))
    base = route.api_base.rstrip("/") if route.api_base else None
    return {"provider": route.provider, "api_base": base, "model": route.model, "path": route.path}


def _sent(endpoint: Identity, messages: Sequence[Mapping[str, str]]) -> Sequence[Mapping[str, Any]]:
    """The conversation the endpoint's provider is sent (providers/send/conversation.py): a key names
    the request body, whichever route sends it; `detached`, as hashing only reads it."""
    return detached(conversation(endpoint.get("provider") or "", messages))


def generation_key(
    endpoint: Identity, params: Mapping[str, Any], messages: Sequence[Mapping[str, str]]
) -> str:
    """`params`: what the request carries (`sent_params`; a manifest's `ModelEntry.keyed_params`)."""
    sent = _sent(endpoint, messages)
    return record_key({"t": "gen", "endpoint": dict(endpoint), "params": dict(params), "messages": sent})


def judge_key(
    endpoint: Identity, params: Mapping[str, Any], messages: Sequence[Mapping[str, str]], ask: int
) -> str:
    sent = _sent(endpoint, messages)
    return record_key(
        {"t": "judge", "endpoint": dict(endpoint), "params": dict(params), "messages": sent, "ask": ask}
    )


def verdict_key(*, benchmark: str, instance_id: str, model: str, judge: str | None, scoring: str) -> str:
    """The slot: `benchmark` is the table's report name (it carries the language); `model` and `judge`
    the config ids (None: a sweep without judges), which the verdict record reports."""
    slot = {
        "benchmark": benchmark,
        "instance": instance_id,
        "label": model,
        "judge": judge,
        "scoring": scoring,
    }
    return record_key({"t": "verdict", **slot})


def verdict_slot(record: Mapping[str, Any]) -> str:
    """The slot a stored verdict record fills: its key. A record written when verdict keys also held
    what the verdict depends on (it has no "basis") fills the slot its fields name: a directory resumed
    since holds a newer record for that slot, and readers count the slot once."""
    if "basis" in record:
        return str(record["key"])
    judge = record.get("judge")
    return verdict_key(
        benchmark=str(record.get("benchmark")),
        instance_id=str(record.get("instance_id")),
        model=str(record.get("model")),
        judge=None if judge is None else str(judge),
        scoring=str(record.get("scoring")),
    )


def older_slots(verdicts: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The slots of the verdict records written before verdict keys named slots (`verdict_slot`)."""
    return frozenset(verdict_slot(r) for r in verdicts if "basis" not in r)


def verdict_basis(
    *,
    gen_key: str,
    judge: tuple[Identity, Mapping[str, Any]] | None,
    reask: int,
    template: str,
    code: str,
    unscored: Collection[int] = (),
) -> str:
    """Everything a verdict depends on besides its slot; `code` the version of the code that derives it
    (benchmarks.scoring_version), `unscored` the constraints an import leaves out as its reference does."""
    return record_key(
        {
            "t": "basis",
            "gen": gen_key,
            "judge": None if judge is None else {"endpoint": dict(judge[0]), "params": dict(judge[1])},
            "reask": reask,
            "template": template,
            "code": code,
            "unscored": sorted(unscored),
        }
    )
