"""The hierarchical route of one device pair: the chain of per-level states it visits.

Spec: network-model.md §3.2 (exit/entry ports, the deterministic port hash), §3.3 (hierarchical
route: outer levels first, each hop entering the inner level through a chosen port).

A *state* is ``(k3, k2, k1)``: per-level node ids, ``-1`` (``CENTRE``) for a switch centre.
:class:`deepstack.routing.Router` turns consecutive states into the links they load.
"""

from __future__ import annotations

from collections.abc import Sequence

from .topology import CENTRE, EXIT_ENTRY, Level

State = tuple[int, int, int]


def port_hash(src: int, dst: int, level: int, hop: int, count: int) -> int:
    """Deterministic port choice ``|x| mod count`` of §3.2."""
    x = (src * 1315423911) ^ (dst * 2654435761) ^ (level * 97) ^ hop
    return abs(x) % count


def route_states(
    lv: Sequence[Level],
    s: State,
    d: State,
    src: int,
    dst: int,
    record: list[tuple[int, int, int, int]] | None = None,
) -> list[State]:
    """States visited from device ``src`` (coordinates ``s``) to ``dst`` (``d``) over levels
    ``lv`` (L3, L2, L1), §3.3. ``record`` collects every port choice ``(level, hop, count,
    choice)`` with more than one candidate port."""
    inner_switch = lv[2].kind == "switch"

    def choose(level: int, hop: int, count: int) -> int:
        k = port_hash(src, dst, level, hop, count)
        if record is not None and count > 1:
            record.append((level, hop, count, k))
        return k

    cur = list(s)
    out: list[State] = [s]

    def push() -> None:
        t = (cur[0], cur[1], cur[2])
        if t != out[-1]:
            out.append(t)

    def walk(level: int, target: int) -> None:
        hops = lv[level].route(cur[level], target)
        if level == 2 or inner_switch:
            for _, b in hops:
                cur[level] = b
                push()
        else:
            traverse(level, hops, None)

    def traverse(level: int, hops: list[tuple[int, int]], final_inner: int | None) -> None:
        outer, inner = lv[level], lv[level + 1]
        for idx, (u, v) in enumerate(hops):
            out_side, in_side = EXIT_ENTRY[outer.hop_direction(u, v)]
            outer_ports = outer.ports(out_side)
            in_ports = inner.ports(in_side)
            out_ports = inner.ports(out_side)
            k_count = min(len(outer_ports), len(in_ports), len(out_ports) or len(in_ports))
            if k_count <= 0:
                continue
            k = choose(level, idx, k_count)
            walk(level + 1, out_ports[k] if out_ports else in_ports[k])
            cur[level] = v
            cur[level + 1] = in_ports[k]
            if level == 0 and not inner_switch:
                l1_in = lv[2].ports(in_side)
                cur[2] = l1_in[choose(-1, idx, len(l1_in))]
            push()
            if idx < len(hops) - 1:
                nu, nv = hops[idx + 1]
                next_out = inner.ports(EXIT_ENTRY[outer.hop_direction(nu, nv)][0])
                if next_out:
                    walk(level + 1, next_out[choose(level, idx + 1, len(next_out))])
            elif final_inner is not None:
                walk(level + 1, final_inner)

    if inner_switch:
        cur[2] = CENTRE
        push()
    start = next((i for i in range(3) if s[i] != d[i]), 2)
    for level in range(start, 2):
        if cur[level] != d[level]:
            traverse(level, lv[level].route(cur[level], d[level]), d[level + 1])
    walk(2, d[2])
    return out
