"""Copy a real vLLM run's capture into the conformance fixtures (tests/fixtures/real-vllm/NAME/), machine paths out.

The story runner keeps vLLM's own answers around the good run in OUT/capture (version.json, models.json,
metrics-before.txt, metrics-after.txt, server.log, launch.txt); tests/sim/test_conformance_vllm_026.py picks every
folder under tests/fixtures/real-vllm/ up as a `real` set. The box's folders (/root/...) become /box/... and the image's venv /venv/..., so no
machine path is committed; a file with anything else that looks like a secret (a token, a key) stops the copy.

Usage: python to_fixtures.py RESULTS_DIR NAME [DEST_ROOT]   (RESULTS_DIR: the unpacked results/, holding capture/;
       DEST_ROOT: tests/fixtures/real-vllm by default)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

FILES = ("version.json", "models.json", "metrics-before.txt", "metrics-after.txt", "server.log", "launch.txt")
SECRET = re.compile(r"(?i)(hf_[A-Za-z0-9]{20,}|api[_-]?key\s*[=:]\s*\S{8,}|BEGIN [A-Z ]*PRIVATE KEY)")


def scrub(text: str) -> str:
    """The box's own folders out of a file's text (the models, the checkout, the work folder; the image's venv)."""
    return re.sub(r"/opt/torch/\.venv/", "/venv/", re.sub(r"/root/", "/box/", text))


def main() -> None:
    src, name = Path(sys.argv[1]) / "capture", sys.argv[2]
    root = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(__file__).resolve().parents[2] / "tests/fixtures/real-vllm"
    dest = root / name
    texts = {f: scrub((src / f).read_text(errors="replace")) for f in FILES}
    for f, text in texts.items():
        if SECRET.search(text):
            raise SystemExit(f"{f}: something like a secret in it; nothing copied")
    dest.mkdir(parents=True, exist_ok=True)
    for f, text in texts.items():
        (dest / f).write_text(text)
    print(f"{len(FILES)} files in {dest}")


if __name__ == "__main__":
    main()
