"""PLENA operator cycle formulas (analytic-model §1.3–§1.4).

Every method returns integer compute-clock cycles for one call on one chip. Shapes: ``h`` hidden
size, ``H``/``KV`` attention/KV heads, ``hd`` head dim, ``s`` query length, ``kv`` attended KV
length, ``b`` sequences, ``F`` intermediate size, ``E`` experts, ``k`` top-k, ``Voc`` vocabulary,
``W`` sliding window. ``mode`` is ``"prefill"`` or ``"decode"`` (decode processes one token per
sequence, whatever ``s`` is passed). Instruction costs are evaluated once per chip profile.
"""

from __future__ import annotations

from plena_opt.chip.profile import ChipProfile, load_chip
from plena_opt.errors import PlenaInputError, PlenaNotFoundError

PREFILL = "prefill"
DECODE = "decode"


def _c(a: int, b: int) -> int:
    """ceil(a / b) for non-negative integers (the spec's ``c(a/b)``)."""
    return -(-a // b)


def _is_prefill(mode: str) -> bool:
    if mode == PREFILL:
        return True
    if mode == DECODE:
        return False
    raise PlenaInputError("mode", f"mode must be one of prefill, decode (got {mode!r})")


class PerfModel:
    """Per-chip compute model; ``PerfModel(load_chip(...))`` or ``PerfModel()`` for the default."""

    def __init__(self, chip: ChipProfile | None = None) -> None:
        self.chip = chip if chip is not None else load_chip()
        cfg = self.chip.config
        self.MLEN: int = cfg.MLEN
        self.BLEN: int = cfg.BLEN
        self.VLEN: int = cfg.VLEN
        self.HLEN: int = cfg.HLEN
        self.VS: int = cfg.VECTOR_SRAM_SIZE * cfg.VLEN  # vector SRAM capacity, elements (§1.3)
        self.Pv: int = cfg.HBM_V_Prefetch_Amount  # VLEN-rows per vector prefetch (§1.3)
        self._costs = self.chip.instruction_costs
        i = self._costs
        self._mm = i["M_MM"]
        self._mv = i["M_MV"]
        self._btmv = i["M_BTMV"]
        self._vb = i["V_BASIC"]
        self._vadd = i["V_ADD_VV"]
        self._vmul = i["V_MUL_VV"]
        self._vexp = i["V_EXP_V"]
        self._vmax = i["V_RED_MAX"]
        self._vtopk = i["V_TOPK"]
        self._sb = i["S_BASIC"]
        self._sexp = i["S_EXP_FP"]
        self._sreci = i["S_RECI_FP"]
        self._pm = i["H_PREFETCH_M"]
        self._pv = i["H_PREFETCH_V"]
        self._store = i["H_STORE_V"]
        self._chunk = self.VLEN * self.Pv  # elements moved per vector prefetch / store
        self._heads_per_tile = self.MLEN // self.HLEN  # GQA heads packed per broadcast tile

    def I(self, name: str) -> int:  # noqa: E743 - the reference's name for the cost table
        """Pipelined cycle cost of ISA instruction ``name`` (§1.2)."""
        try:
            return self._costs[name]
        except KeyError:
            raise PlenaNotFoundError(
                "instruction", f"unknown instruction {name!r}; known: {', '.join(self._costs)}"
            ) from None

    # §1.3 derived helpers -------------------------------------------------------------------

    def spill(self, n: int) -> int:
        """Prefill activation spill cycles for an ``n``-element activation (0 if it fits in VS)."""
        if n <= self.VS:
            return 0
        return ((n - self.VS) // self._chunk) * self._pv * 2

    def eff_btmm(self, rows: int, cols: int) -> int:
        """Effective broadcast-tile matmul cost ``c(r/Bl)·c(c/Bl)·Bl`` (§1.3)."""
        return _c(rows, self.BLEN) * _c(cols, self.BLEN) * self.BLEN

    # §1.4 operators -------------------------------------------------------------------------

    def rms_layer(self, h: int, s: int, b: int, mode: str) -> int:
        """RMSNorm over ``h`` for ``s·b`` tokens (decode: ``b``); prefill adds the spill."""
        lanes = h // self.VLEN
        if _is_prefill(mode):
            return 10 * self._sb + lanes * 8 * s * b * self._vb + self.spill(h * s * b)
        return 10 * self._sb + lanes * 8 * b * self._vb

    def projection(self, h: int, H: int, KV: int, hd: int, s: int, b: int, mode: str) -> int:
        """QKV projection + RoPE + KV store; Q width is taken as ``h`` (reference quirk, §1.4)."""
        bl, m, mm, vb = self.BLEN, self.MLEN, self._mm, self._vb
        prefill = _is_prefill(mode)
        rows = s * b if prefill else b
        kvw = KV * hd
        row_tiles = _c(rows, bl)
        q = row_tiles * _c(h, m) * _c(h, bl) * mm
        k_or_v = row_tiles * _c(kvw, m) * _c(kvw, bl) * mm
        rope = (H + KV) * _c(rows, self.VLEN) * vb
        store = 2 * ((rows * kvw) // self._chunk) * self._store
        total = q + 2 * k_or_v + rope + store
        if prefill:
            total += self.spill(h * s * b)
        return total

    def flash_attention(self, H: int, KV: int, hd: int, s: int, kv: int, b: int, mode: str) -> int:
        """GQA flash attention over ``kv`` keys; decode uses one query row tile."""
        if not _is_prefill(mode):
            return _c(kv, self.MLEN) * self.flash_attention_decode_tc(H, KV, hd, b)
        m, bl = self.MLEN, self.BLEN
        g = H // KV
        pack = _c(g, self._heads_per_tile)
        w = min(m, kv)
        inner = (
            (4 + self.eff_btmm(min(s, m), min(kv, m)) + self._pm) * pack
            + w * (4 * self._vb + 2 * self._sb + self._sexp) * g  # online softmax
            + 4
            + _c(hd, bl) * _c(w, bl) * self._mm * g  # P·V
            + w * (self._vb + 4 + self._sreci) * g  # output rescale
        )
        return inner * _c(s, m) * _c(kv, m) * KV * b

    def flash_attention_decode_tc(self, H: int, KV: int, hd: int, b: int) -> int:
        """Decode flash-attention cycles per KV column tile.

        Decode attention depends on ``kv`` only through ``tc = ceil(kv / MLEN)``:
        ``flash_attention(H, KV, hd, 1, kv, b, "decode") == tc * flash_attention_decode_tc(...)``.
        """
        g = H // KV
        inner = (
            (self._btmv + self._pm) * _c(g, self._heads_per_tile)
            + (4 * self._vb + 2 * self._sb + self._sexp) * g
            + _c(hd, self.BLEN) * self._mv * g
            + (2 * self._vb + 1) * g
        )
        return inner * KV * b

    def sliding_window_attention(
        self,
        H: int,
        KV: int,
        hd: int,
        s: int,
        kv: int,
        b: int,
        W: int,
        sinks: int = 1,
        mode: str = PREFILL,
    ) -> int:
        """Per-head sliding-window attention (window ``W``, ``sinks`` sink tokens); KV unused."""
        m, bl, vl = self.MLEN, self.BLEN, self.VLEN
        softmax_op = self._vexp + self._vmax + self._vb
        if _is_prefill(mode):
            e = min(s, W)
            qk = (4 + self._mm * _c(s, bl) * _c(e, bl) + self._pm) * H
            scale = H * s * _c(e, vl)
            softmax = s * _c(e + sinks, vl) * softmax_op
            pv = (4 + self._mm * _c(e, m) + self._pm) * _c(s, bl) * _c(hd, bl) * H
        else:
            e = min(kv, W)
            qk = (4 + self._mv * _c(e, bl) + self._pm) * H
            scale = H * _c(e, vl)
            softmax = _c(e + sinks, vl) * softmax_op
            pv = (4 + self._mv * _c(e, m) + self._pm) * _c(hd, bl) * H
        return (qk + scale + softmax + pv) * b

    def residual(self, h: int, s: int, b: int, mode: str) -> int:
        """Residual add over ``h`` for ``s·b`` tokens (decode: ``b``); prefill adds the spill."""
        lanes = h // self.VLEN
        if _is_prefill(mode):
            return (self._vadd + 3) * s * lanes * b + self.spill(h * s * b)
        return (self._vadd + 3) * lanes * b

    def feed_forward(self, h: int, F: int, s: int, b: int, mode: str) -> int:
        """Dense SwiGLU FFN: gate+up, SiLU·mul, down (decode: one token per sequence)."""
        bl, m = self.BLEN, self.MLEN
        tokens = s * b if _is_prefill(mode) else b
        row_tiles = _c(tokens, bl)
        gate_up = 2 * row_tiles * _c(h, m) * _c(F, bl) * self._mm
        silu = _c(F, self.VLEN) * 6 * self._vb * tokens
        down = row_tiles * _c(F, m) * _c(h, bl) * self._mm
        return gate_up + silu + down

    def embeddings(self, h: int, s: int, b: int, mode: str) -> int:
        """Embedding lookup: one vector prefetch per VLEN chunk per token."""
        tokens = s * b if _is_prefill(mode) else b
        return 3 * self._sb + tokens * _c(h, self.VLEN) * self._pv

    def lm_head(self, h: int, Voc: int, b: int) -> int:
        """LM head for the last token of ``b`` sequences."""
        return self._lm_head_rows(h, Voc, b)

    def lm_head_full_seq(self, h: int, Voc: int, s: int, b: int) -> int:
        """LM head over all ``s·b`` positions (LLaDA)."""
        return self._lm_head_rows(h, Voc, s * b)

    def softmax_full_seq(self, Voc: int, s: int, b: int) -> int:
        """Softmax over the vocabulary for all ``s·b`` positions (LLaDA)."""
        return b * s * _c(Voc, self.VLEN) * 6 * self._vb

    def _lm_head_rows(self, h: int, Voc: int, rows: int) -> int:
        return 3 * self._sb + _c(rows, self.BLEN) * _c(h, self.MLEN) * _c(Voc, self.BLEN) * self._mm

    def mlp_moe(self, h: int, s: int, b: int, E: int, k: int, F: int, mode: str) -> int:
        """Routed-expert MLP with balanced routing: each expert gets ``c(T·k/E)`` tokens."""
        m, bl, vl, mm, mv, pm = self.MLEN, self.BLEN, self.VLEN, self._mm, self._mv, self._pm
        prefill = _is_prefill(mode)
        T = b * s if prefill else b
        common = (
            _c(h, vl) * self._vb * 4 * T  # normalise
            + (4 + _c(E, vl) * self._vtopk) * T  # top-k
            + T * _c(k, vl) * (self._vexp + self._vmax + self._vb)  # softmax over k
            + T * k * _c(F, vl) * 6 * self._vb  # SiLU
            + T * k * _c(h, vl) * (self._vmul + self._vadd)  # weighted combine
        )
        if prefill:
            tpe = _c(T * k, E)
            router = (4 + _c(h, m) * mm + pm) * _c(T, bl) * _c(E, bl)
            up = E * (4 + _c(h, m) * mm + pm) * _c(tpe, bl) * _c(2 * F, bl)
            down = E * (4 + _c(F, m) * mm + pm) * _c(tpe, bl) * _c(h, bl)
        else:
            router = T * (4 + _c(h, m) * mv + pm) * _c(E, bl)
            up = T * k * (4 + _c(h, m) * mv + pm) * _c(2 * F, bl)
            down = T * k * (4 + _c(F, m) * mv + pm) * _c(h, bl)
        return common + router + up + down

    # Extensions beyond the reference (docs/models.md): MLA and two-matrix MLPs -------------

    def _matmul(self, rows: int, k: int, n: int) -> int:
        """``rows × k`` by ``k × n`` on the systolic array, the tiling of ``projection``."""
        return _c(rows, self.BLEN) * _c(k, self.MLEN) * _c(n, self.BLEN) * self._mm

    def mla_projection(
        self,
        h: int,
        H: int,
        q_lora: int,
        kv_lora: int,
        rope: int,
        qk: int,
        v: int,
        s: int,
        b: int,
        mode: str,
    ) -> int:
        """MLA projections of ``H`` local heads: Q (low-rank ``h→q_lora→H·qk``, or direct when
        ``q_lora`` is 0), the latent KV down-projection ``h→kv_lora+rope`` (replicated over TP),
        RoPE on the queries and the shared key, the latent store and the output ``H·v→h``."""
        prefill = _is_prefill(mode)
        rows = s * b if prefill else b
        if q_lora:
            q = self._matmul(rows, h, q_lora) + self._matmul(rows, q_lora, H * qk)
        else:
            q = self._matmul(rows, h, H * qk)
        latent = kv_lora + rope
        kv = self._matmul(rows, h, latent)
        rope_ops = (H + 1) * _c(rows, self.VLEN) * self._vb
        store = ((rows * latent) // self._chunk) * self._store
        total = q + kv + rope_ops + store + self._matmul(rows, H * v, h)
        if prefill:
            total += self.spill(h * s * b)
        return total

    def mla_decode_absorb(self, H: int, nope: int, kv_lora: int, v: int, b: int) -> int:
        """Absorbed-MLA decode, per step: ``q_nope·W_UK`` into the latent space and the latent
        output through ``W_UV`` (per head, ``b`` sequences)."""
        return H * (self._matmul(b, nope, kv_lora) + self._matmul(b, kv_lora, v))

    def mla_decode_attention_tc(self, H: int, kv_lora: int, rope: int, b: int) -> int:
        """Absorbed-MLA decode attention per KV column tile of ``MLEN`` cached latents: the ``H``
        heads of a sequence share one latent key/value of ``kv_lora + rope`` elements (scores,
        online softmax, P·C, rescale)."""
        m = self.MLEN
        inner = (
            self._matmul(H, kv_lora + rope, m)
            + self._pm
            + H * (4 * self._vb + 2 * self._sb + self._sexp)
            + self._matmul(H, m, kv_lora)
            + H * (2 * self._vb + 1)
        )
        return inner * b

    def mla_prefill_attention(
        self, H: int, nope: int, v: int, kv_lora: int, s: int, kv: int, b: int
    ) -> int:
        """Non-absorbed MLA prefill: decompress K_nope and V of ``kv`` tokens from the latent
        (``kv_lora → H·(nope + v)``), then flash attention with one KV head per query head."""
        decompress = self._matmul(kv * b, kv_lora, H * (nope + v))
        return decompress + self.flash_attention(H, H, v, s, kv, b, PREFILL)

    def feed_forward_plain(self, h: int, F: int, s: int, b: int, mode: str) -> int:
        """Two-matrix MLP (up, GELU, down; StarCoder2, Falcon), priced like ``feed_forward``
        without the gate matrix."""
        bl, m = self.BLEN, self.MLEN
        tokens = s * b if _is_prefill(mode) else b
        row_tiles = _c(tokens, bl)
        up = row_tiles * _c(h, m) * _c(F, bl) * self._mm
        act = _c(F, self.VLEN) * 6 * self._vb * tokens
        down = row_tiles * _c(F, m) * _c(h, bl) * self._mm
        return up + act + down
