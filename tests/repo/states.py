"""Working-tree states a careful user's checkout can be in, built on the messy repo through any Host (reusable fixture).

Each state is a shell fragment run in the checkout after `make_messy_repo` plus one commit that adds
`python/sglang/__init__.py` (so a trial tree has an importable sglang package). `build_state(host, repo, name)`
builds one; `ALL` builds them all in one checkout. `IN_PLACE_LOSES` names the states today's in-place
stash/apply/restore path is known to change (issue #19) — the manifest must catch each.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from helpers import make_messy_repo  # noqa: E402

from specdoctor.host.base import Host  # noqa: E402

__all__ = ["STATES", "IN_PLACE_LOSES", "build_state", "apply_states", "EXAMPLE_PATHS", "NON_UTF8", "SGLANG_INIT"]

SGLANG_INIT = "python/sglang/__init__.py"
NON_UTF8 = b"caf\xe9-latin1.py"
_ID = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
_BASE = ("mkdir -p python/sglang && printf '__version__ = \"0.0.0+test\"\\n' > python/sglang/__init__.py && "
         "git add python/sglang/__init__.py && git commit -qm 'sglang package'")

STATES: dict[str, str] = {
    # the user's uncommitted .gitignore change ignores files that HEAD's rules do not
    "gitignore-modified": "printf '*.log\\n*.dat\\nlocal_cache/\\n' > .gitignore && printf data > keep.dat && "
                          "mkdir -p local_cache && printf c > local_cache/c.txt",
    # an untracked folder with its own .gitignore and the files it ignores
    "nested-gitignore": "mkdir -p scratch/deep && printf '*.bin\\n' > scratch/.gitignore && printf b > scratch/a.bin "
                        "&& printf n > scratch/notes.txt && printf d > scratch/deep/x.bin",
    "assume-unchanged": "printf 'def launch():\\n    return \"local\"\\n' > python/sglang/srt/entrypoints/engine.py && "
                        "git update-index --assume-unchanged python/sglang/srt/entrypoints/engine.py",
    "skip-worktree": "git update-index --skip-worktree run.sh && printf '#!/bin/sh\\necho mine\\n' > run.sh",
    "intent-to-add": "printf 'x = 1\\n' > python/sglang/srt/ita_new.py && git add -N python/sglang/srt/ita_new.py",
    "crlf-text-auto": "printf '* text=auto\\n' > .gitattributes && printf 'a = 1\\n' > crlf.py && "
                      "git add .gitattributes crlf.py && git commit -qm attrs && printf 'a = 2\\r\\nb = 3\\r\\n' > crlf.py "
                      "&& printf 'u = 1\\r\\n' > crlf_untracked.py",
    "modes": "printf s > private.key && chmod 600 private.key && printf g > group.txt && chmod 664 group.txt && "
             "printf '#!/bin/sh\\n' > all.sh && chmod 777 all.sh && chmod 600 python/sglang/srt/models/kimi_k25.py",
    "empty-dirs": "mkdir -p empty_a empty_b/nested/deeper python/sglang/srt/empty_pkg",
    "non-utf8": "printf 'z = 1\\n' > \"$(printf 'caf\\351-latin1.py')\" && mkdir -p \"$(printf 'd\\377ir')\" && "
                "printf y > \"$(printf 'd\\377ir/f')\"",
    "big-untracked": "truncate -s 200M big_untracked.bin",
    "symlinks": "ln -s python/sglang/srt/models/kimi_k25.py kimi_link.py && ln -s missing dangling",
    "submodule-local-changes": "git init -q ../sub$$ && (cd ../sub$$ && printf s > s.txt && git add s.txt && "
                               "git commit -qm s) && git -c protocol.file.allow=always submodule -q add ../sub$$ sub "
                               "&& git commit -qm sub && printf dirty >> sub/s.txt && printf new > sub/untracked.txt",
}

IN_PLACE_LOSES = {"gitignore-modified", "nested-gitignore", "assume-unchanged", "skip-worktree", "intent-to-add",
                  "crlf-text-auto",
                  "modes", "empty-dirs"}
"""States the in-place path (backup → stash_all → apply → restore) comes back different from (issue #19)."""


def build_state(host: Host, repo: str, name: str, without: set[str] | frozenset[str] = frozenset()) -> None:
    """A fresh messy checkout at `repo` in state `name` ('all': every state but the submodule and `without`)."""
    make_messy_repo(host, repo)
    names = [n for n in STATES if n != "submodule-local-changes" and n not in without] if name == "all" else [name]
    apply_states(host, repo, names, base=True)


EXAMPLE_PATHS = ("python/sglang/srt/entrypoints/engine.py", "run.sh", "python/sglang/srt/models/kimi_k25.py")
"""Tracked files the fragments name (assume-unchanged, skip-worktree, modes/symlink); `apply_states` swaps them."""


def apply_states(host: Host, repo: str, names: list[str], *, paths: dict[str, str] | None = None,
                 base: bool = False) -> None:
    """Put an existing checkout (e.g. a scenario's) in the states `names`; `paths` maps EXAMPLE_PATHS to tracked
    files of that checkout that no patch touches (so the states do not change what is measured)."""
    frags = []
    for n in names:
        frag = STATES[n]
        for old, new in (paths or {}).items():
            frag = frag.replace(old, new)
        frags.append(f"({frag})")
    script = " && ".join(["set -e", 'cd "$R"', *([_BASE] if base else []), *frags])
    host.run(["bash", "-c", 'R="$1"\n' + script, "build_state", repo], env=_ID)
