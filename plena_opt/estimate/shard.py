"""Per-device shapes and the dense/MoE parallel schemes of a plan (analytic-model §4.2–§4.3)."""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from deepstack import ParallelScheme

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.plan import Plan, Workload
from plena_opt.models import ModelSpec


def moe_parallel(tp: int, ep: int, num_experts: int, mode: str) -> tuple[int, int]:
    """(tp', ep') of the routed experts (§4.2): ``replace`` folds TP ranks into EP ranks."""
    if mode == "keep":
        return tp, ep
    n = tp * ep
    if n <= num_experts:
        return 1, n
    if n % num_experts:
        raise PlenaInputError("ep", f"tp*ep={n} is not a multiple of the {num_experts} experts")
    return n // num_experts, num_experts


def lane_wise(attention_tp: int, moe_tp: int) -> bool:
    """Whether an explicit MoE split's token exchange runs lane by lane
    (``DeviceShard.moe_lanes``): MoE TP rank ``l`` of every expert group trades with rank ``l``
    of the others over the ``moe_ep`` ranks of its lane.

    Devices are numbered TP-innermost, so lane ``l`` (devices ≡ l mod moe_tp) holds
    ``attention_tp/moe_tp`` replicas of every attention-DP rank's tokens when ``moe_tp`` divides
    the attention TP (``keep``: one; ``replace``, moe_tp = 1: all): those replicas split the
    tokens and each sends its share to its lane's peers. Otherwise (e.g. attention TP1 × DP64
    under MoE TP8 × EP8) a lane holds only some DP ranks' tokens: each token goes once to each
    of its expert groups on a flat all-to-all over all ``moe_tp·moe_ep`` ranks (none when
    moe_ep = 1), then the group all-gathers the copies over its MoE TP ranks; the combine
    returns the all-reduced sums on the same flat all-to-all (``comm.layer_collectives``).
    The ``replace``/``keep`` shorthands are priced lane by lane always, as the reference does
    (the same unless ``replace`` gives moe_tp > tp: tp·ep above the expert count with
    tp < tp·ep/experts)."""
    return attention_tp % moe_tp == 0


def moe_split(plan: Plan, num_experts: int) -> tuple[int, int]:
    """(moe_tp, moe_ep) of the routed experts over one expert group's ``tp·ep`` devices: the
    plan's explicit ``moe_tp`` (``moe_ep = tp·ep / moe_tp``) or its ``moe_tp_mode`` shorthand."""
    if plan.moe_tp:
        return plan.moe_tp, plan.tp * plan.ep // plan.moe_tp
    return moe_parallel(plan.tp, plan.ep, num_experts, plan.moe_tp_mode)


def shorthand_split(plan: Plan, num_experts: int) -> Plan:
    """``plan`` with its ``moe_tp_mode`` shorthand written as the general ``moe_tp`` (the same
    experts' split, priced alike)."""
    from dataclasses import replace

    return replace(plan, moe_tp_mode="replace", moe_tp=moe_split(plan, num_experts)[0])


def dense_scheme(plan: Plan) -> ParallelScheme:
    """Attention, dense FFN, norms and pipeline transfers: EP ranks behave as DP (§4.2)."""
    return _checked_scheme(plan.tp, 1, plan.cp, plan.dp * plan.ep, plan.pp, None, 1)


def _checked_scheme(
    tp: int, ep: int, cp: int, dp: int, pp: int, ep1: int | None, ep2: int | None
) -> ParallelScheme:
    """``ParallelScheme(tp=tp, ep=ep, cp=cp, dp=dp, pp=pp, ep1=ep1, ep2=ep2)`` of degrees a
    ``Plan`` has already checked (positive ints), without checking them again."""
    scheme = object.__new__(ParallelScheme)
    scheme.__dict__.update(
        tp=int(tp), ep=int(ep), sp=1, cp=int(cp), dp=int(dp), pp=int(pp), ep1=ep1, ep2=ep2
    )
    return scheme


def moe_scheme(plan: Plan, tp_moe: int, ep_moe: int) -> ParallelScheme:
    """Routed experts: (tp', ep') with the plan's cp, dp, pp (§4.2). Degrees that are positive
    ``int``s (a shard's, with a checked plan's cp, dp, pp) skip ``ParallelScheme``'s checks
    (``_checked_scheme``: the same scheme); any other value is checked (and refused) there."""
    if type(tp_moe) is int and type(ep_moe) is int and tp_moe > 0 and ep_moe > 0:
        return _checked_scheme(tp_moe, ep_moe, plan.cp, plan.dp, plan.pp, ep_moe, 1)
    return ParallelScheme(
        tp=tp_moe, ep=ep_moe, cp=plan.cp, dp=plan.dp, pp=plan.pp, ep1=ep_moe, ep2=1
    )


@dataclass(frozen=True)
class DeviceShard:
    """Shapes held by one device (§4.3). Counts are elements/heads/sequences, not bytes."""

    micro: int  # sequences per micro-batch, ceil(batch / pp)
    b_dev: int  # sequences per device, ceil(micro / (dp·ep))
    heads: int  # H / tp
    kv_heads: int  # KV / tp, or 1 when tp > KV (replicated)
    ffn: int  # ceil(F / tp)
    vocab: int  # ceil(Voc / tp)
    expert_ffn: int  # ceil(moe_intermediate / tp')
    tp_moe: int
    ep_moe: int
    q_prefill: int  # ceil(S_in / cp)
    shared_ffn: int = 0  # ceil(shared experts' width / tp): TP-split, replicated over ep and dp
    linear_k_heads: int = 0  # Gated DeltaNet key heads / tp (linear-attention layers)
    linear_v_heads: int = 0  # Gated DeltaNet value heads / tp
    # The token exchange runs lane by lane over moe_ep ranks (``lane_wise``); the
    # shorthands always do, as the reference prices them.
    moe_lanes: bool = True

    def without_micro(self) -> DeviceShard:
        """This shard with ``micro`` = 0 (``dataclasses.replace(self, micro=0)``, without
        running ``__init__`` again)."""
        out = object.__new__(DeviceShard)
        out.__dict__.update(self.__dict__)
        out.__dict__["micro"] = 0
        return out

    def with_batch(self, batch_size: int, plan: Plan) -> DeviceShard:
        """``build`` of this shard's model, ``plan`` and prompt length at ``batch_size``: its
        ``micro`` and ``b_dev`` of that batch (``build``'s expressions), every other field
        kept (they follow from the model, the plan and the prompt length alone; r16trim)."""
        out = object.__new__(DeviceShard)
        d = out.__dict__
        d.update(self.__dict__)
        micro = ceil(batch_size / plan.pp)
        d["micro"], d["b_dev"] = micro, ceil(micro / (plan.dp * plan.ep))
        return out

    @classmethod
    def build(cls, model: ModelSpec, plan: Plan, workload: Workload) -> DeviceShard:
        tp = plan.tp
        if model.num_experts:
            tp_moe, ep_moe = moe_split(plan, model.num_experts)
        else:
            tp_moe, ep_moe = tp, 1
        micro = ceil(workload.batch_size / plan.pp)
        kv = model.num_kv_heads
        shard = object.__new__(cls)  # every field given: the generated ``__init__`` skipped
        shard.__dict__.update(
            micro=micro,
            b_dev=ceil(micro / (plan.dp * plan.ep)),
            heads=model.num_heads // tp,
            kv_heads=kv // tp if tp <= kv else 1,
            ffn=ceil(model.intermediate_size / tp),
            vocab=ceil(model.vocab_size / tp),
            expert_ffn=ceil(model.moe_intermediate_size / tp_moe),
            tp_moe=tp_moe,
            ep_moe=ep_moe,
            q_prefill=ceil(workload.input_seq_len / plan.cp),
            shared_ffn=ceil(model.shared_expert_intermediate_size / tp),
            linear_k_heads=ceil(model.linear_num_key_heads / tp),
            linear_v_heads=ceil(model.linear_num_value_heads / tp),
            moe_lanes=not plan.moe_tp or lane_wise(tp, tp_moe),
        )
        return shard


def validate_plan(
    model: ModelSpec, plan: Plan, workload: Workload, num_devices: int, noc_name: str
) -> list[str]:
    """Raise ``PlenaInputError`` for an illegal plan (§4.2); return the plan's warnings."""
    if plan.world_size != num_devices:
        raise PlenaInputError(
            "plan",
            f"the plan uses {plan.world_size} devices but NoC profile '{noc_name}' has "
            f"{num_devices}",
        )
    tp, heads, kv = plan.tp, model.num_heads, model.num_kv_heads
    if heads % tp:
        raise PlenaInputError("tp", f"tp={tp} does not divide the {heads} attention heads")
    if (tp <= kv and kv % tp) or (tp > kv and tp % kv):
        raise PlenaInputError("tp", f"tp={tp} and the {kv} KV heads must divide one another")
    if model.linear_num_key_heads % tp and model.linear_layers:  # the cheap test first
        raise PlenaInputError(
            "tp",
            f"tp={tp} does not divide the {model.linear_num_key_heads} linear-attention key heads",
        )
    if plan.pp > model.num_layers:
        raise PlenaInputError("pp", f"pp={plan.pp} exceeds the {model.num_layers} layers")
    if plan.cp > 1:
        if plan.cp > workload.input_seq_len:
            raise PlenaInputError(
                "cp", f"cp={plan.cp} exceeds the {workload.input_seq_len}-token prompt"
            )
        if (
            model.family != "llama"
            or model.num_experts
            or model.is_mla
            # any sliding, chunked or linear-attention layer: one pass over the runs (the three
            # layer counts are each a pass; this test runs for every candidate with cp > 1)
            or any(r.count and r.attention != "full_attention" for r in model.layer_runs)
        ):
            raise PlenaInputError(
                "cp",
                "context parallelism is modelled for dense full-attention models only",
                bare=True,
            )
    if model.num_experts:
        _, ep_moe = moe_split(plan, model.num_experts)
        # with EPLB replicas the physical experts E + N must split (estimate.eplb.check_redundant
        # refuses naming eplb_redundant); without, the experts themselves
        if model.num_experts % ep_moe and not workload.eplb_redundant:
            raise PlenaInputError(
                "moe_tp" if plan.moe_tp else "ep",
                f"{model.num_experts} experts do not split evenly over {ep_moe} "
                "expert-parallel ranks",
                bare=True,
            )
    elif plan.ep > 1:
        raise PlenaInputError(
            "ep", "ep > 1 needs a model with MoE layers; use dp for a dense model"
        )
    elif plan.moe_tp:
        raise PlenaInputError("moe_tp", "moe_tp needs a model with MoE layers")
    return plan_warnings(model, plan, workload)


def plan_warnings(model: ModelSpec, plan: Plan, workload: Workload) -> list[str]:
    """Non-fatal remarks about a legal plan (§4.2 warnings), in the reference order."""
    warnings = []
    micro = ceil(workload.batch_size / plan.pp)
    replicas = plan.dp * plan.ep
    if micro < replicas:
        warnings.append(
            f"the {micro}-sequence micro-batch leaves some of the {replicas} data-parallel "
            "ranks idle"
        )
    if workload.batch_size % plan.pp:
        warnings.append(
            f"batch {workload.batch_size} is not a multiple of pp={plan.pp}; micro-batches are "
            f"rounded up to {micro}"
        )
    per_stage = ceil(model.num_layers / plan.pp)
    if per_stage * (plan.pp - 1) >= model.num_layers:
        warnings.append(
            f"{model.num_layers} layers in stages of {per_stage} leave pipeline stages empty"
        )
    if plan.tp > model.num_kv_heads:
        warnings.append(
            f"tp={plan.tp} exceeds the {model.num_kv_heads} KV heads; KV heads are replicated"
        )
    return warnings
