"""Repository tools: catalog every local change of a git checkout, and triage each by relevance to the live server."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import unidiff
from pydantic import BaseModel, Field

from specdoctor.errors import ToolFailed, ToolRetry
from specdoctor.parsers.git import (
    NumStat,
    StashEntry,
    SubmoduleState,
    logging_only,
    parse_name_status_z,
    parse_numstat_z,
    parse_stash_list,
    parse_submodule_status,
    split_z,
    unquote_c_path,
)
from specdoctor.parsers.sections import split_sections
from specdoctor.parsers.sglang import parse_launch_command
from specdoctor.toolkit import ToolContext, registry, tool
from specdoctor.tools.checkout.code_timing import run_once_scope
from specdoctor.tools.remote import remote_text

__all__ = ["CatalogInput", "Catalog", "DiffFile", "Hunk", "TriageInput", "Triage", "TriageRow", "ServedConfig",
           "catalog_diffs", "triage_diffs", "git", "repo_state", "full_diff", "classify_path", "resolve_served",
           "HUNK_TEXT_CAP"]

HUNK_TEXT_CAP = 4000
"""Characters of hunk text kept per file; beyond it hunks keep header and counts only (never dropped)."""


def git(repo: str, *args: str) -> list[str]:
    """argv for a git command in `repo` with literal pathspecs and no pager/colour surprises."""
    return ["git", "--literal-pathspecs", "-c", "core.quotePath=true", "-c", "color.ui=never", "-C", repo, *args]


class Hunk(BaseModel):
    """One hunk of a file's diff against HEAD."""

    index: int
    header: str
    source_start: int
    source_length: int
    target_start: int
    target_length: int
    added: int
    removed: int
    logging_only: bool = Field(description="Every changed line is a logging call, print, comment or blank.")
    text: str | None = Field(default=None, description="The hunk as text; None once the per-file cap is spent.")


class DiffFile(BaseModel):
    """One changed path (tracked change against HEAD, or untracked)."""

    path: str
    status: str = Field(description="git letter (M/A/D/T) against HEAD, or '?' for untracked.")
    added: int | None = None
    removed: int | None = None
    binary: bool = False
    staged: bool = False
    unstaged: bool = False
    untracked: bool = False
    hunks: list[Hunk] = Field(default_factory=list)
    summarized: bool = Field(default=False, description="Hunk text was capped (counts and headers are all kept).")
    logging_only: bool = False


class Catalog(BaseModel):
    """Everything that differs from HEAD in a checkout, plus stashes and submodules."""

    repo: str
    head: str | None
    head_subject: str | None = None
    branch: str | None = Field(default=None, description="None when HEAD is detached.")
    detached: bool = False
    files: list[DiffFile] = Field(default_factory=list)
    untracked: list[str] = Field(default_factory=list)
    staged: list[str] = Field(default_factory=list)
    unstaged: list[str] = Field(default_factory=list)
    stashes: list[StashEntry] = Field(default_factory=list)
    submodules: list[SubmoduleState] = Field(default_factory=list)
    in_progress: list[str] = Field(default_factory=list, description="merge/rebase/cherry-pick/... in progress.")
    total_added: int = 0
    total_removed: int = 0

    def summary_line(self) -> str:
        where = self.branch or f"detached at {(self.head or '?')[:10]}"
        return (f"{len([f for f in self.files if not f.untracked])} changed files (+{self.total_added} "
                f"-{self.total_removed}), {len(self.untracked)} untracked, {len(self.stashes)} stashes on {where}")


class CatalogInput(BaseModel):
    """Arguments of catalog_diffs."""

    repo: str = Field(description="Path of the git checkout on the host.")
    max_hunk_chars: int = Field(default=HUNK_TEXT_CAP, ge=0, description="Hunk text kept per file.")


_STATES = {"MERGE_HEAD": "merge", "rebase-merge": "rebase", "rebase-apply": "rebase/am",
           "CHERRY_PICK_HEAD": "cherry-pick", "REVERT_HEAD": "revert", "BISECT_LOG": "bisect"}


_STATE_SCRIPT = remote_text("repo_state.sh")


def repo_state(ctx: ToolContext, repo: str, *, full: bool = False) -> tuple[str | None, str | None, str, list[str]]:
    """(HEAD sha or None, branch or None, absolute git dir, operations in progress) in one round-trip.

    With `full`, "conflicts" and "submodule ..." entries for unmerged paths and moved or dirty
    submodules are added to the in-progress list (check_mutable's needs, same round-trip).
    """
    res = ctx.host.run(["sh", "-c", _STATE_SCRIPT, "repo_state", repo], check="ignore")
    if not res.ok:
        raise ToolRetry(f"{repo} is not a git checkout on {ctx.host.name}: {res.stderr.strip()[:200]}")
    sec = {k: "\n".join(v) for k, v in split_sections(res.stdout, first="head").items()}
    probe, unmerged, subs, dirty = (sec.get(k, "") for k in ("probe", "unmerged", "subs", "dirty"))
    lines = sec["head"].split("\n") + ["", "", ""]
    gdir, head = lines[0].strip(), lines[1].strip() or None
    branch = lines[2].strip().removeprefix("refs/heads/") or None
    busy = [what for name, what in _STATES.items() if name in probe.split()]
    if full:
        busy += ["conflicts"] if unmerged.strip() else []
        busy += [f"submodule {ln[1:].split(' ')[1]} (other commit checked out)" for ln in subs.splitlines()
                 if ln[:1] in "+U" and " " in ln[1:]]
        busy += [f"submodule {p} (local changes)" for p in dirty.splitlines() if p.strip()]
    return head, branch, gdir, busy


def full_diff(ctx: ToolContext, repo: str, paths: list[str] | None = None) -> unidiff.PatchSet:
    """`git diff HEAD` (tracked changes, staged or not) parsed with unidiff."""
    args = ["diff", "--no-color", "--no-ext-diff", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/", "HEAD"]
    if paths:
        args += ["--", *paths]
    text = ctx.host.run(git(repo, *args), timeout=300).stdout
    return unidiff.PatchSet(text)


def _patched_path(pf: unidiff.PatchedFile) -> str:
    raw = pf.target_file if pf.target_file and pf.target_file != "/dev/null" else pf.source_file
    return unquote_c_path(raw)


def _hunks(pf: unidiff.PatchedFile, cap: int) -> tuple[list[Hunk], bool]:
    out: list[Hunk] = []
    budget = cap
    summarized = False
    for i, h in enumerate(pf):
        changed = [ln.value.rstrip("\n") for ln in h if ln.is_added or ln.is_removed]
        text = str(h)
        keep = len(text) <= budget
        budget -= len(text) if keep else 0
        summarized |= not keep
        out.append(Hunk(index=i, header=f"@@ -{h.source_start},{h.source_length} +{h.target_start},"
                                        f"{h.target_length} @@ {h.section_header}".rstrip(),
                        source_start=h.source_start, source_length=h.source_length, target_start=h.target_start,
                        target_length=h.target_length, added=h.added, removed=h.removed,
                        logging_only=logging_only(changed), text=text if keep else None))
    return out, summarized


@tool(effect="read")
def catalog_diffs(ctx: ToolContext, args: CatalogInput) -> Catalog:
    """Catalog a checkout's local changes: HEAD and branch, per-file status/counts/hunks, untracked, stashes, submodules.

    Staged and unstaged changes are both diffed against HEAD; big diffs keep every file and hunk header but
    cap the stored hunk text. File names with spaces, unicode or newlines are read with git's -z forms.
    """
    repo = args.repo
    head, branch, _gdir, busy = repo_state(ctx, repo)
    if head is None:
        raise ToolFailed(f"{repo} has no commits yet (unborn HEAD); nothing to diff against")
    run = ctx.host.run
    subject = run(git(repo, "log", "-1", "--format=%s", "HEAD"), check="ignore").stdout.strip() or None
    nums = {n.path: n for n in parse_numstat_z(run(git(repo, "diff", "--numstat", "-z", "--no-renames", "HEAD")).stdout)}
    status = parse_name_status_z(run(git(repo, "diff", "--name-status", "-z", "--no-renames", "HEAD")).stdout)
    staged = split_z(run(git(repo, "diff", "--cached", "--name-only", "-z", "--no-renames")).stdout)
    unstaged = split_z(run(git(repo, "diff", "--name-only", "-z", "--no-renames")).stdout)
    untracked = split_z(run(git(repo, "ls-files", "--others", "--exclude-standard", "-z")).stdout)
    stashes = parse_stash_list(run(git(repo, "stash", "list", "--format=%H%x00%gs"), check="ignore").stdout)
    subs = parse_submodule_status(run(git(repo, "submodule", "status"), check="ignore").stdout)
    patches = {_patched_path(pf): pf for pf in full_diff(ctx, repo)}
    cat = Catalog(repo=repo, head=head, head_subject=subject, branch=branch, detached=branch is None,
                  untracked=untracked, staged=staged, unstaged=unstaged, stashes=stashes, submodules=subs,
                  in_progress=busy)
    for path in sorted(set(nums) | set(status)):
        n = nums.get(path) or NumStat(path=path, added=0, removed=0)
        f = DiffFile(path=path, status=status.get(path, "M"), added=n.added, removed=n.removed, binary=n.binary,
                     staged=path in staged, unstaged=path in unstaged)
        pf = patches.get(path)
        if pf is None and not n.binary:  # a name unidiff could not map: ask git for this file alone
            pf = next(iter(full_diff(ctx, repo, [path])), None)
        if pf is not None:
            f.hunks, f.summarized = _hunks(pf, args.max_hunk_chars)
            f.logging_only = bool(f.hunks) and all(h.logging_only for h in f.hunks)
        cat.files.append(f)
        cat.total_added += n.added or 0
        cat.total_removed += n.removed or 0
    for path in untracked:
        cat.files.append(DiffFile(path=path, status="?", untracked=True))
    return cat


# -- triage ---------------------------------------------------------------------------------------------------------

Subsystem = Literal["attention-backend", "attention-common", "moe-routing", "communicator", "speculative",
                    "model", "model-config", "executor", "scheduler", "engine", "layers", "benchmarks",
                    "tests", "docs", "other"]

_BACKEND_FILES = {
    "flashinfer_mla_backend": ("flashinfer_mla", {"flashinfer"}),
    "flashinfer_backend": ("flashinfer", {"flashinfer"}),
    "triton_backend": ("triton", {"triton"}),
    "flashattention_backend": ("fa3", {"fa3", "fa4"}),
    "flashmla_backend": ("flashmla", {"flashmla"}),
    "trtllm_mla_backend": ("trtllm_mla", {"trtllm_mla"}),
    "trtllm_mha_backend": ("trtllm_mha", {"trtllm_mha"}),
    "cutlass_mla_backend": ("cutlass_mla", {"cutlass_mla"}),
    "aiter_backend": ("aiter", {"aiter"}),
    "torch_native_backend": ("torch_native", {"torch_native"}),
    "flex_attention_backend": ("flex_attention", {"flex_attention"}),
    "wave_backend": ("wave", {"wave"}),
    "ascend_backend": ("ascend", {"ascend"}),
    "nsa_backend": ("nsa", {"nsa", "dsa"}),
}
# vLLM 0.26: vllm/v1/attention/backends/<name>.py, chosen with --attention-backend NAME (only under that folder)
_VLLM_BACKEND_FILES = {"triton_attn": "TRITON_ATTN", "flash_attn": "FLASH_ATTN", "flashinfer": "FLASHINFER"}
KNOWN_ENTRY_CLASSES = {
    "kimi_k25": ["KimiK25ForConditionalGeneration"],
    "deepseek_v2": ["DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM"],
    "llama_eagle3": ["LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM"],
    "kimi_k25_eagle3": ["Eagle3DeepseekV2ForCausalLM"],
    "llama": ["LlamaForCausalLM"],
    "qwen2": ["Qwen2ForCausalLM"],
    "qwen3_moe": ["Qwen3MoeForCausalLM"],
}
_WEIGHTS: dict[str, int] = {"attention-backend": 90, "communicator": 88, "moe-routing": 85, "speculative": 84,
                            "attention-common": 80, "executor": 75, "model": 72, "model-config": 60,
                            "scheduler": 65, "layers": 60, "engine": 50, "other": 30, "benchmarks": 3, "tests": 2,
                            "docs": 1}
_EAGLE_HOOKS = re.compile(r"eagle3|aux_hidden|layers_to_capture|get_embed_and_head|set_embed", re.I)


class ServedConfig(BaseModel):
    """What the live server runs, as far as triage needs it."""

    source: str = Field(description="server_info / find_server_processes / launch / none")
    attention_backends: list[str] = Field(default_factory=list)
    speculative_algorithm: str | None = None
    tp_size: int | None = None
    model_path: str | None = None
    draft_model_path: str | None = None
    architectures: list[str] = Field(default_factory=list, description="From the target's config.json.")
    draft_architectures: list[str] = Field(default_factory=list)
    moe: bool | None = None
    notes: list[str] = Field(default_factory=list)


class TriageRow(BaseModel):
    """One changed file's verdict, with its reason."""

    path: str
    status: str
    subsystem: str
    detail: str | None = Field(default=None, description="Backend name, architecture(s), ...")
    on_hot_path: bool | None = Field(description="None when the server configuration could not be read.")
    logging_only: bool = False
    essential: bool = False
    reason: str
    priority: int = Field(description="1 = bisect first.")
    score: float = 0.0


class Triage(BaseModel):
    """Changed files ranked by bisection priority (on-path, non-logging first; essentials last)."""

    repo: str
    served: ServedConfig
    rows: list[TriageRow] = Field(default_factory=list)

    def summary_line(self) -> str:
        on = sum(1 for r in self.rows if r.on_hot_path and not r.logging_only and not r.essential)
        return (f"{len(self.rows)} files triaged: {on} on the hot path, "
                f"{sum(r.logging_only for r in self.rows)} logging-only, {sum(r.essential for r in self.rows)} "
                f"essential ({self.served.source})")


class TriageInput(BaseModel):
    """Arguments of triage_diffs."""

    repo: str = Field(description="Path of the git checkout on the host.")
    port: int | None = Field(default=None, description="Port of the live server to read the config from.")
    launch: str | None = Field(default=None, description="The launch line (fallback when no live server).")
    essential: list[str] = Field(default_factory=list, description="Paths (or file names) the user calls essential.")


def classify_path(path: str) -> tuple[str, str | None]:
    """(subsystem, detail) from a repo-relative path alone."""
    p = path.replace("\\", "/")
    name = p.rsplit("/", 1)[-1]
    stem = name.removesuffix(".py")
    if p.endswith((".md", ".rst", ".txt", ".ipynb")) or "/docs/" in f"/{p}":
        return "docs", None
    if re.search(r"(^|/)(benchmark|benchmarks)/|(^|/)bench_[^/]*\.py$", p):
        return "benchmarks", None
    if re.search(r"(^|/)tests?/|(^|/)test_[^/]*\.py$", p):
        return "tests", None
    if "v1/attention/backends/" in p and stem in _VLLM_BACKEND_FILES:
        return "attention-backend", _VLLM_BACKEND_FILES[stem]
    if "layers/attention/" in p:
        if stem in _BACKEND_FILES:
            return "attention-backend", _BACKEND_FILES[stem][0]
        if stem.endswith("_backend"):
            return "attention-backend", stem.removesuffix("_backend")
        return "attention-common", None
    if "layers/moe/" in p:
        return "moe-routing", stem
    if re.search(r"(^|/)(communicator\.py$|distributed/|device_communicators/|layer_boundary/)", p) and \
            "managers/communicator.py" not in p:
        return "communicator", stem
    if re.search(r"/(speculative|spec_decode)/|v1/sample/rejection_sampler\.py$", f"/{p}"):
        return "speculative", stem
    if re.search(r"(^|/)models/[^/]+\.py$", p):
        return "model", stem
    if re.search(r"(^|/)configs/[^/]+\.py$", p):
        return "model-config", stem
    if "model_executor/" in p or "v1/worker/" in p:
        return "executor", stem
    if "managers/" in p or "v1/core/sched/" in p:
        return "scheduler", stem
    if re.search(r"(^|/)(entrypoints/|launch_server\.py$|server_args\.py$|arg_groups/)", p):
        return "engine", stem
    if "/layers/" in f"/{p}":
        return "layers", stem
    return "other", None


def _flatten(d: Any, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(d, dict):
        for k, v in d.items():
            if isinstance(v, dict | list):
                _flatten(v, out)
            else:
                out.setdefault(str(k), v)
    elif isinstance(d, list):
        for v in d:
            _flatten(v, out)
    return out


def _read_architectures(ctx: ToolContext, model_path: str | None) -> list[str]:
    if not model_path:
        return []
    res = ctx.host.run(["cat", "--", f"{model_path.rstrip('/')}/config.json"], check="ignore")
    if not res.ok:
        return []
    try:
        cfg = json.loads(res.stdout)
    except ValueError:
        return []
    arch = cfg.get("architectures") or []
    return [a for a in arch if isinstance(a, str)]


def resolve_served(ctx: ToolContext, port: int | None, launch: str | None) -> ServedConfig:
    """The live server's configuration: server_info, else find_server_processes, else the launch line."""
    notes: list[str] = []
    flat, source = _served_from_tools(ctx, port, notes) if port is not None else ({}, "none")
    if source == "none" and launch:
        flat, source = _served_from_launch(launch), "launch"
    served = ServedConfig(source=source, notes=notes)
    if source == "none":
        return served
    _set_served_args(served, flat)
    _read_served_models(ctx, served)
    return served


def _served_from_tools(ctx: ToolContext, port: int, notes: list[str]) -> tuple[dict[str, Any], str]:
    """The flattened output of the first of server_info / find_server_processes that answers, and its name;
    ({}, "none") when neither does (each failure noted)."""
    for name in ("server_info", "find_server_processes"):
        try:
            res = registry.call(ctx, name, {"port": port})
        except Exception as exc:  # a tool module that has not landed, or a host error: try the next source
            notes.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if res.ok and res.output:
            flat = _flatten(res.output, {})
            argv = flat.get("launch_command") or flat.get("argv")
            if not flat.get("attention_backend") and isinstance(argv, str):
                flat = {**parse_launch_command(argv).model_dump(), **{k: v for k, v in flat.items() if v}}
            return flat, name
        notes.append(f"{name}: {res.status}: {res.summary}")
    return {}, "none"


def _served_from_launch(launch: str) -> dict[str, Any]:
    """The launch line's arguments, its extra ones flattened in."""
    flat = parse_launch_command(launch).model_dump()
    return {**flat, **flat.get("extra", {})}


def _set_served_args(served: ServedConfig, flat: dict[str, Any]) -> None:
    """Attention backends, speculative algorithm, tp size and model paths from the flattened configuration."""
    backends = [flat.get(k) for k in ("attention_backend", "decode_attention_backend", "prefill_attention_backend",
                                      "speculative_draft_attention_backend")]
    served.attention_backends = sorted({str(b).lower() for b in backends if b})
    algo = flat.get("speculative_algorithm")
    served.speculative_algorithm = str(algo).upper() if algo else None
    tp = flat.get("tp_size")
    served.tp_size = int(tp) if isinstance(tp, int | str) and str(tp).isdigit() else None
    served.model_path = flat.get("model_path")
    served.draft_model_path = flat.get("speculative_draft_model_path")


def _read_served_models(ctx: ToolContext, served: ServedConfig) -> None:
    """The target's and the draft's architectures, and whether the target has experts, from their config.json."""
    served.architectures = _read_architectures(ctx, served.model_path)
    served.draft_architectures = _read_architectures(ctx, served.draft_model_path)
    if served.model_path and not served.architectures:
        served.notes.append(f"could not read {served.model_path}/config.json on the host")
    cfg = ctx.host.run(["cat", "--", f"{(served.model_path or '').rstrip('/')}/config.json"], check="ignore") \
        if served.model_path else None
    if cfg is not None and cfg.ok:
        served.moe = bool(re.search(r'"(n_routed_experts|num_experts|num_local_experts)"\s*:\s*[1-9]', cfg.stdout))


def _entry_classes(ctx: ToolContext, repo: str, path: str, stem: str) -> list[str]:
    res = ctx.host.run(["cat", "--", f"{repo.rstrip('/')}/{path}"], check="ignore")
    m = re.search(r"^EntryClass\s*=\s*\[?([\w\s,]+)\]?", res.stdout, re.M) if res.ok else None
    if m:
        return [c.strip() for c in m.group(1).split(",") if c.strip()]
    return KNOWN_ENTRY_CLASSES.get(stem, [])


_Verdict = tuple[str, str | None, bool | None, str]
"""(subsystem, detail, on the hot path (None: unknown), reason)."""


def _verdict(ctx: ToolContext, repo: str, f: DiffFile, served: ServedConfig) -> _Verdict:
    sub, detail = classify_path(f.path)
    if sub == "attention-backend":
        return _backend_verdict(sub, detail, served)
    if sub == "model":
        return _model_verdict(ctx, repo, f, detail, served)
    if sub == "communicator":
        return _communicator_verdict(sub, detail, served)
    if sub == "moe-routing":
        return _moe_verdict(sub, detail, served)
    if sub == "speculative":
        return _speculative_verdict(sub, detail, served)
    return _fixed_verdict(sub, detail, served.source != "none")


def _backend_verdict(sub: str, detail: str | None, served: ServedConfig) -> _Verdict:
    """An attention backend's file is on the hot path when the server runs that backend."""
    users = next((v[1] for k, v in _BACKEND_FILES.items() if v[0] == detail), {detail or ""})
    if not served.attention_backends:
        return sub, detail, None, f"{detail} attention backend; the server's --attention-backend is unknown"
    on = bool(users & set(served.attention_backends))
    return sub, detail, on, (f"{detail} backend file; server runs --attention-backend "
                             f"{','.join(served.attention_backends)} → {'on' if on else 'off'} the hot path")


def _model_verdict(ctx: ToolContext, repo: str, f: DiffFile, detail: str | None, served: ServedConfig) -> _Verdict:
    """A model file is on the hot path when one of its entry classes is a served (target or draft) architecture."""
    sub = "model"
    classes = _entry_classes(ctx, repo, f.path, detail or "")
    detail = ",".join(classes) or detail
    served_arch = set(served.architectures) | set(served.draft_architectures)
    if not served_arch:
        return sub, detail, None, f"model file ({detail}); served architectures unknown"
    on = bool(set(classes) & served_arch)
    return sub, detail, on, (f"model file for {detail or '?'}; served: {', '.join(sorted(served_arch))} → "
                             f"{'on' if on else 'off'} the hot path")


def _communicator_verdict(sub: str, detail: str | None, served: ServedConfig) -> _Verdict:
    """All-reduce code runs only with more than one TP rank."""
    if served.tp_size is None:
        return sub, detail, None if served.source == "none" else True, "communicator/all-reduce; tp size unknown"
    on = served.tp_size > 1
    return sub, detail, on, f"communicator/all-reduce; tp_size={served.tp_size} → {'on' if on else 'off'} path"


def _moe_verdict(sub: str, detail: str | None, served: ServedConfig) -> _Verdict:
    """MoE routing runs unless the served model is known to have no experts."""
    if served.moe is False:
        return sub, detail, False, "MoE routing, but the served model has no experts"
    on = True if served.source != "none" else None
    return sub, detail, on, "MoE routing runs on every decode step of an MoE model"


def _speculative_verdict(sub: str, detail: str | None, served: ServedConfig) -> _Verdict:
    """A speculative worker is on the hot path unless the server runs no speculation or the other algorithm."""
    algo = served.speculative_algorithm
    if served.source == "none":
        return sub, detail, None, "speculative worker; server config unknown"
    if not algo:
        return sub, detail, False, "speculative worker, but the server runs without speculation"
    off = ("ngram" in (detail or "") and "EAGLE" in algo) or ("eagle" in (detail or "") and algo == "NGRAM")
    return sub, detail, not off, f"speculative worker ({detail}); --speculative-algorithm {algo}"


def _fixed_verdict(sub: str, detail: str | None, known: bool) -> _Verdict:
    """Subsystems whose verdict the server's configuration does not change (only whether it is known at all)."""
    if sub in ("benchmarks", "tests", "docs"):
        return sub, detail, False, f"{sub}: not part of the serving process"
    if sub == "engine":
        return sub, detail, True if known else None, "engine/process start-up: runs once, but sets worker env/args"
    if sub in ("scheduler", "executor", "attention-common", "layers"):
        return sub, detail, True if known else None, f"{sub} code runs for every batch"
    if sub == "model-config":
        return sub, detail, None, "model config class"
    return sub, detail, None, "unclassified path"


def _when_it_runs(ctx: ToolContext, repo: str, f: DiffFile, sub: str, on: bool | None,
                  reason: str) -> tuple[bool | None, str]:
    """Off the per-batch path when every change sits in a function that runs once (code_timing), whatever the file."""
    if on is False or sub in ("benchmarks", "tests", "docs") or not f.path.endswith(".py") or not f.hunks \
            or any(h.text is None for h in f.hunks):
        return on, reason
    res = ctx.host.run(["cat", "--", f"{repo.rstrip('/')}/{f.path}"], check="ignore")
    scope = run_once_scope(res.stdout, [(h.text or "", h.target_start) for h in f.hunks]) if res.ok else None
    if scope is None:
        return on, reason
    return False, (f"{sub} file, but every change is in {scope}: runs once (start-up, construction, loading), not "
                   "per batch — what it sets may still be read per batch")


def _is_essential(f: DiffFile, sub: str, on: bool | None, named: list[str], ctx: ToolContext,
                  repo: str) -> tuple[bool, str | None]:
    for n in named:
        if f.path == n or f.path.endswith("/" + n.lstrip("/")) or f.path.rsplit("/", 1)[-1] == n:
            return True, "named essential by the user"
    if sub == "model" and on:
        text = "\n".join(h.text or "" for h in f.hunks)
        if not text and not f.untracked:
            text = "\n".join(str(pf) for pf in full_diff(ctx, repo, [f.path]))
        added = "\n".join(ln[1:] for ln in text.splitlines() if ln.startswith("+"))
        if _EAGLE_HOOKS.search(added):
            return True, "adds EAGLE-3 hooks to the served model: the speculative server needs it to start"
    return False, None


@tool(effect="read")
def triage_diffs(ctx: ToolContext, args: TriageInput) -> Triage:
    """Triage each changed file: subsystem, on/off the live server's hot path (with the reason), logging-only, essential.

    The configuration is read from the live server (`server_info`, else `find_server_processes`, else the
    launch line); model files are matched against `architectures` in the served model's config.json.
    Rows are ranked for bisection: on-path non-logging changes first, off-path and logging-only later,
    essential patches last (they are always applied).
    """
    cat = catalog_diffs(ctx, CatalogInput(repo=args.repo))
    served = resolve_served(ctx, args.port, args.launch)
    rows: list[TriageRow] = []
    for f in cat.files:
        if f.untracked and not f.path.endswith(".py"):
            continue
        sub, detail, on, reason = _verdict(ctx, args.repo, f, served)
        # essential first: hooks a served model needs to start sit in its __init__ (run once, yet required)
        essential, why = _is_essential(f, sub, on, args.essential, ctx, args.repo)
        on, reason = _when_it_runs(ctx, args.repo, f, sub, on, reason)
        score = float(_WEIGHTS.get(sub, 30)) * (1.0 if on else 0.6 if on is None else 0.1)
        if f.logging_only:
            score, reason = min(score, 2.0), f"{reason}; only logging/print/comment lines changed"
        if essential:
            score, reason = -1.0, f"{reason}; essential: {why}"
        rows.append(TriageRow(path=f.path, status=f.status, subsystem=sub, detail=detail, on_hot_path=on,
                              logging_only=f.logging_only, essential=essential, reason=reason, priority=0,
                              score=score))
    rows.sort(key=lambda r: (-r.score, r.path))
    for i, r in enumerate(rows, 1):
        r.priority = i
    return Triage(repo=args.repo, served=served, rows=rows)
