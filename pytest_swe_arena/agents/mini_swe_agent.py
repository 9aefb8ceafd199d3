"""mini-swe-agent's format: its trajectory file (``mini -o trajectory.json``), read for its usage and, as
turns, for what it did (``read_mini_trajectory``).

mini rewrites the trajectory after every step (a model call and its command), in place:
each assistant message's ``extra.response.usage`` (OpenAI chat usage, as the provider sent
it: prompt with cached tokens inside, completion with reasoning inside) and ``extra.cost``
(litellm's price), per served model, and ``info.model_stats.instance_cost`` in all. It is
read whole at each poll for the live cap; a half-written one leaves the last read standing.
OpenAI's chat usage has no cache-write field: litellm's ``cache_creation_input_tokens``
(passed on from Anthropic) is read when present, else cache writes are 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..files import json_table, json_text, read_json_object
from ..spend.usage import Usage, add_usages
from .reports import AgentSpend, CallTally, FigureReader, call_usage
from .turns import (
    Turn,
    answer_call,
    as_text,
    clip,
    mark_call,
    tool_turn,
)


def chat_call(usage: Any, where: str, cost: float | None, reader: FigureReader) -> Usage:
    """An OpenAI chat ``usage``: prompt includes cached (and cache-write) tokens, completion includes reasoning."""
    cached = reader.count(json_table(usage.get("prompt_tokens_details")), "cached_tokens")
    written = reader.count(usage, "cache_creation_input_tokens")  # what litellm passes on from Anthropic
    reasoning = reader.count(json_table(usage.get("completion_tokens_details")), "reasoning_tokens")
    output = reader.rest(reader.count(usage, "completion_tokens", None), reasoning)
    return call_usage(reader.rest(reader.count(usage, "prompt_tokens", None), cached, written), output, reasoning,
                      cached, written, cost)


def read_trajectory(data: Mapping[str, Any], asked: str | None) -> AgentSpend:
    """Usage per served model from a trajectory, why figures were refused, and what else it says."""
    tally = CallTally()
    reader = FigureReader("trajectory")
    messages = data.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        extra = json_table(json_table(message).get("extra"))
        response = json_table(extra.get("response"))
        if json_table(message).get("role") != "assistant" or not json_table(response.get("usage")):
            continue
        reader.where = f"trajectory message {index}"
        model = json_text(response.get("model")) or asked or "unknown"
        # Each message is a call: a server may give every call the same response id.
        tally.add(f"message-{index}", model,
                  chat_call(response["usage"], reader.where, reader.cost(extra, "cost"), reader))
    info = json_table(data.get("info"))
    reader.where = "trajectory info.model_stats"
    instance_cost = reader.cost(json_table(info.get("model_stats")), "instance_cost")
    models = tally.by_model()
    problems = list(reader.problems)
    summed = add_usages(models.values()).cost_usd if models else 0.0
    if instance_cost is not None and summed is not None and abs(instance_cost - summed) > 1e-6:
        problems.append(f"trajectory: instance_cost {instance_cost} is not the sum of its messages' cost {summed}")
    details = {"exit_status": info.get("exit_status"), "mini_version": info.get("mini_version"),
               "reported_cost_usd": instance_cost}
    return AgentSpend(models, next(iter(models), None), "report", problems, json_text(info.get("exit_status")),
                      details)


def read_mini_spend(trajectory: Path, asked: str | None) -> AgentSpend:
    """What mini spent, from its trajectory; none when it was stopped before its first step was saved."""
    data = read_json_object(trajectory)
    if data is None:  # that spend is only in what the provider saw
        return AgentSpend({}, None, "none", [], None, {"trajectory": False})
    return read_trajectory(data, asked)


class Trajectory:
    """The trajectory file, read whole at each poll (mini rewrites it after every step, not atomically)."""

    def __init__(self, path: Path, asked: str | None):
        self.path = path
        self.asked = asked
        self.last: Mapping[str, Usage] = {}

    def poll(self) -> Mapping[str, Usage]:
        data = read_json_object(self.path)
        if data is not None:  # half-written: the last whole one stands
            self.last = read_trajectory(data, self.asked).models
        return self.last


# -- its transcript, as turns ---------------------------------------------------------------

def read_mini_trajectory(lines: Iterable[str]) -> list[Turn]:
    """mini-swe-agent's trajectory (``--output``: one JSON document, ``messages`` in the chat format).

    The system message and the first user message (the task, as prompt.txt shows it) are skipped;
    assistant messages give their text and ``tool_calls`` and, from their ``extra.response.usage``, a
    step; tool messages their output, and the final ``exit`` message the exit status.
    """
    try:
        document = json_table(json.loads("\n".join(lines)))
    except ValueError:
        return [{"role": "error", "kind": "error", "text": "the trajectory is not JSON"}]
    turns: list[Turn] = []
    users = steps = 0
    messages = document.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        message = json_table(message)
        role, content = message.get("role"), message.get("content")
        if role == "user":
            users += 1
            if users > 1:
                turns.append({"role": "user", "kind": "text", "text": clip(as_text(content))})
        elif role == "assistant":
            start = len(turns)
            if content:
                turns.append({"role": "assistant", "kind": "text", "text": clip(as_text(content))})
            for call in message.get("tool_calls") or []:
                call = json_table(call)
                function = json_table(call.get("function"))
                turns.append(tool_turn(str(function.get("name") or ""), function.get("arguments"), call.get("id")))
            mark_call(turns, start, f"message-{index}")
            extra = json_table(message.get("extra"))
            usage = json_table(json_table(extra.get("response")).get("usage"))
            if usage:  # OpenAI chat usage: cached tokens inside the prompt's, reasoning inside the completion's
                steps += 1
                turns.append({"role": "meta", "kind": "step", "step": steps, "reason": "model call", "tokens": {
                    "input": usage.get("prompt_tokens"), "output": usage.get("completion_tokens"),
                    "cached": json_table(usage.get("prompt_tokens_details")).get("cached_tokens"),
                    "reasoning": json_table(usage.get("completion_tokens_details")).get("reasoning_tokens")},
                    "cost_usd": extra.get("cost")})
        elif role == "tool":
            answer_call(turns, message.get("tool_call_id"), content)
        elif role == "exit":
            status = json_table(message.get("extra")).get("exit_status")
            turns.append({"role": "meta", "kind": "event", "text": f"exit: {status}"})
    return turns
