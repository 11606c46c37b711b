"""A tolerant reading of the break-even analysis stored in `Report.breakeven` (a plain dict for now)."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

__all__ = ["BreakevenView", "spec_tps", "alpha_to_tau", "view"]


def _f(*names: str) -> Any:
    return Field(default=None, validation_alias=AliasChoices(*names))


def spec_tps(tau: float, k: int, t_draft_ms: float, t_verify_ms: float) -> float:
    """Predicted speculative tok/s: τ tokens per cycle of k drafts and one verify."""
    return tau / (k * t_draft_ms + t_verify_ms) * 1000.0


def alpha_to_tau(alpha: float, k: int) -> float:
    """Expected accept length for per-token acceptance α and k drafted tokens (bonus included)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


class BreakevenView(BaseModel):
    """The break-even numbers the report shows; accepts the field names the breakeven tool may use."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    tau: float | None = _f("tau", "tau_obs", "accept_length", "tau_measured")
    tau_star: float | None = _f("tau_star", "break_even_tau", "tau_breakeven", "breakeven_tau")
    margin: float | None = _f("margin", "tau_margin")
    alpha: float | None = _f("alpha", "acceptance", "alpha_measured")
    k: int | None = _f("k", "num_draft_tokens", "speculative_num_steps")
    best_k: int | None = _f("best_k", "k_best")
    baseline_tps: float | None = _f("baseline_tps", "baseline_tok_s", "tps_base", "baseline")
    spec_tps: float | None = _f("spec_tps", "spec_tok_s", "tps_spec", "predicted_tps")
    t_decode_ms: float | None = _f("t_decode_ms", "decode_ms")
    t_draft_ms: float | None = _f("t_draft_ms", "draft_ms")
    t_verify_ms: float | None = _f("t_verify_ms", "verify_ms")
    alpha_needed: dict[str, float] = Field(
        default_factory=dict, validation_alias=AliasChoices("alpha_needed", "alpha_for_target", "targets"))
    curves: dict[str, list[tuple[float, float]]] = Field(
        default_factory=dict, validation_alias=AliasChoices("curves", "curve_points", "points"))

    @field_validator("alpha_needed", mode="before")
    @classmethod
    def _targets(cls, v: Any) -> Any:
        """Accept {target: α} or [{target|speedup, alpha}] rows."""
        if isinstance(v, list):
            return {str(r.get("target", r.get("speedup"))): r.get("alpha", r.get("alpha_needed")) for r in v}
        return {str(k): a for k, a in v.items()} if isinstance(v, dict) else v

    @field_validator("curves", mode="before")
    @classmethod
    def _curves(cls, v: Any) -> Any:
        """Accept {k: [[τ, tps]]}, {k: [{tau, tps}]} or [{k, points}]."""
        if isinstance(v, list):
            v = {str(r["k"]): r.get("points", []) for r in v}
        out: dict[str, list[tuple[float, float]]] = {}
        for k, pts in (v or {}).items():
            out[str(k)] = [(p["tau"], p["tps"]) if isinstance(p, dict) else tuple(p) for p in pts]
        return out

    def curve_points(self, ks: range = range(1, 6), taus: int = 41) -> dict[int, list[tuple[float, float]]]:
        """Per-k predicted (τ, tok/s) points: the stored ones, else computed from the timings."""
        if self.curves:
            return {int(k): pts for k, pts in sorted(self.curves.items(), key=lambda kv: int(kv[0]))}
        if self.t_verify_ms is None or self.t_draft_ms is None:
            return {}
        out: dict[int, list[tuple[float, float]]] = {}
        for k in ks:
            grid = [1.0 + k * i / (taus - 1) for i in range(taus)]
            out[k] = [(t, spec_tps(t, k, self.t_draft_ms, self.t_verify_ms)) for t in grid]
        return out

    @property
    def empty(self) -> bool:
        return self.tau is None and self.tau_star is None and not self.curves


def view(data: dict[str, Any] | BaseModel | None) -> BreakevenView | None:
    """A BreakevenView of whatever the engine stored (dict or the tool's model), or None."""
    if data is None:
        return None
    if isinstance(data, BaseModel):
        data = data.model_dump()
    return BreakevenView.model_validate(data)
