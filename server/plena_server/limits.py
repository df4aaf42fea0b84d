"""Server-side limits that protect the server from oversized requests (issue 7)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MIB = 1024 * 1024


class ServerLimits(BaseModel):
    """Upper bounds enforced on every request; exceeding one is RESOURCE_EXHAUSTED."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_concurrent_searches: int = Field(4, ge=1, description="searches running at once")
    max_devices: int = Field(4096, ge=1, description="devices in a NoC profile")
    max_trials: int = Field(20000, ge=1, description="trials per search request")
    max_samples: int = Field(100_000, ge=1, description="Monte Carlo samples per plan")
    max_recheck_top_k: int = Field(16, ge=0, description="re-checked front plans per search")
    max_inline_json_bytes: int = Field(1 * MIB, ge=1, description="inline config/profile size")
    max_message_bytes: int = Field(16 * MIB, ge=MIB, description="gRPC send/receive limit")
    max_trace_bytes: int = Field(12 * MIB, ge=0, description="compressed trace bytes per reply")
    max_deadline_seconds: float = Field(3600.0, gt=0, description="longest search budget, s")
    grace_seconds: float = Field(5.0, ge=0, description="SIGTERM drain period, s")
