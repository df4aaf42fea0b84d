"""The simulate flags read back, shared by local and remote mode: ``--durations``, ``--noise``
(validated within the request bounds) and the Chrome traces written by name."""

from __future__ import annotations

import json
from pathlib import Path

from plena_opt.api.simulation_io import (
    NoiseSpec,
    check_duration,
    check_schedule_durations,
    parse_noise,
    write_trace,
)
from plena_opt.errors import PlenaInputError


def parse_durations(
    text: str, schedule: str | None = None, simulate_comm: bool = False
) -> dict[str, float]:
    """``F=1,B=2`` → ``{"F": 1.0, "B": 2.0}`` (ms per stage). Each value must be finite, >= 0 and
    <= ``MAX_DURATION``; keys must be unique and, with ``schedule``, op types of that schedule.
    Errors name ``durations`` or ``durations.<type>``."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PlenaInputError("durations", f"--durations item {part!r} must look like F=1")
        if key in out:
            raise PlenaInputError(
                f"durations.{key}", f"durations.{key} is given twice; each op type once"
            )
        try:
            out[key] = float(value)
        except ValueError:
            raise PlenaInputError(
                f"durations.{key}", f"durations.{key} must be a number, got {value.strip()!r}"
            ) from None
    if schedule is not None:  # the server's rules and order (schedule op types first)
        return check_schedule_durations(schedule, out, simulate_comm=simulate_comm)
    return {k: check_duration(v, f"durations.{k}") for k, v in out.items()}


def noise_from_flag(text: str | None, flag: str = "--noise") -> NoiseSpec:
    """The ``--noise`` flag (key=value list or JSON) as a validated ``NoiseSpec`` within the
    request bounds every front end applies (``api.limits.check_noise``: MoE experts, tokens,
    alpha, straggler factor); errors name the field and the range."""
    from plena_opt.api.limits import LimitError, check_noise

    if text and text.strip().startswith("{"):
        try:
            spec = parse_noise(json.loads(text))
        except (json.JSONDecodeError, RecursionError) as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise PlenaInputError("noise", f"{flag} is not valid JSON: {why}") from None
    else:
        spec = parse_noise(text)
    try:
        return check_noise(spec)
    except LimitError as exc:
        raise PlenaInputError(exc.field, f"{flag}: {exc}") from None


def write_traces(path: str, traces: dict[str, dict]) -> list[str]:
    """Write Chrome traces by name: ``deterministic`` at ``path``, the others beside it as
    ``<stem>.<name><suffix>`` (local and remote mode)."""
    base = Path(path)
    out = []
    for name, trace in traces.items():
        target = base if name == "deterministic" else base.with_suffix(f".{name}{base.suffix}")
        out.append(str(write_trace(target, trace)))
    return out
