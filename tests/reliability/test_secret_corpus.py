"""The redactor on a corpus of real secret shapes (each must vanish) and of ordinary lines (each must stay as is)."""

from __future__ import annotations

import secrets
import time

import pytest

from specdoctor.host.redact import REDACTED, redact_text


def _hex(n: int) -> str:
    return secrets.token_hex(n)


def _b62(n: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(secrets.choice(alphabet) for _ in range(n))


def corpus() -> list[tuple[str, str]]:
    """(line, secret) pairs: fresh random values in the shapes real ones have, in the places they turn up."""
    aws_id = "AKIA" + "".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))
    aws_secret = _b62(30) + "/" + _b62(9)
    plain = "Pw" + _hex(6)
    basic = _b62(24) + "=="
    wandb = _hex(20)
    jwt = f"eyJ{_b62(20)}.eyJ{_b62(30)}.{_b62(43)}"
    pem = f"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn{_b62(60)}\n-----END OPENSSH PRIVATE KEY-----"
    return [
        (f"server_args=ServerArgs(model_path='/models/kimi', api_key='{plain}', port=30000)", plain),
        (f'server_args=ServerArgs(model_path="/m", api_key="{plain}", admin_api_key="{plain}x")', plain),
        (f'{{"model": "kimi", "api_key": "{plain}", "tp_size": 8}}', plain),
        (f"{{'api_key': '{plain}', 'port': 30000}}", plain),
        (f"Authorization: Bearer {plain}", plain),
        (f'curl -H "Authorization: Bearer {plain}" http://127.0.0.1:30000/v1/models', plain),
        (f"headers={{'Authorization': 'Bearer {plain}'}}", plain),
        (f"Proxy-Authorization: Basic {basic}", basic),
        (f"requests.get(url, headers={{'Authorization': f'Token {plain}'}})", plain),
        (f"password {plain}", plain),
        (f"password: {plain}", plain),
        (f"Password = {plain}", plain),
        (f"passwd={plain}", plain),
        (f"the secret is {plain}", plain),
        (f"{aws_id}:{aws_secret}", aws_secret),
        (f"{aws_id}:{aws_secret}", aws_id),
        (f"aws_secret_access_key = {aws_secret}", aws_secret),
        (f"AWS_SECRET_ACCESS_KEY={aws_secret} python -m sglang.launch_server", aws_secret),
        (f"export HF_TOKEN=hf_{_b62(34)}", "hf_"),
        (f"python -m sglang.launch_server --model-path /m --api-key {plain} --tp 8", plain),
        (f"python -m sglang.launch_server --api-key='{plain} with space' --tp 8", plain),
        (f"openai.api_key = 'sk-proj-{_b62(48)}'", "sk-proj-"),
        (f"ANTHROPIC_API_KEY: sk-ant-api03-{_b62(90)}", "sk-ant-"),
        (f"token ghp_{_b62(36)} used for the clone", "ghp_"),
        (f"github_pat_{_b62(22)}_{_b62(59)}", "github_pat_"),
        (f"slack: xoxb-{_hex(6)}-{_hex(6)}-{_b62(24)}", "xoxb-"),
        (f"GITLAB_TOKEN: glpat-{_b62(20)}", "glpat-"),
        (f"google key AIza{_b62(35)}", "AIza"),
        (f"stripe sk_live_{_b62(24)}", "sk_live_"),
        (f"npm_{_b62(36)} in .npmrc", "npm_"),
        (f"cookie jwt={jwt}", jwt.split(".")[1]),
        (f"{pem}", pem.splitlines()[1]),
        (f"git clone https://bot:{plain}@github.com/org/repo.git", plain),
        (f"HTTPS_PROXY=http://svc:{plain}@proxy.internal:3128", plain),
        (f"db:\n  password: '{plain}'", plain),
        (f'"secret": "{plain}"', plain),
        (f"WANDB_API_KEY=\"{wandb}\"", wandb),
    ]


ORDINARY = [
    "[2026-01-05 10:00:01 TP0] Decode batch. #running-req: 1, #token: 2431, token usage: 0.01, accept len: 2.31, "
    "gen throughput (token/s): 82.17, #queue-req: 0",
    "python -m sglang.launch_server --model-path /models/Kimi-K2.5 --tp 8 --speculative-algorithm EAGLE3 "
    "--speculative-num-steps 3 --attention-backend flashinfer --port 30000",
    "NCCL_PROTO=Simple NCCL_ALGO=Ring CUDA_VISIBLE_DEVICES=0,1,2,3 SGLANG_USE_AITER_FP8_PER_TOKEN=1",
    "max_new_tokens: 512, token_usage: 0.05, keys: 4",
    "GPU 0: NVIDIA H200 (UUID: GPU-5f3c1a2b-0000-1111-2222-333344445555)",
    "the password prompt is disabled; no secret manager configured",
    "commit 4f2a9c0d1e2b3c4d5e6f708192a3b4c5d6e7f809 Merge upstream sglang v0.5.9",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  state.tar.gz",
    "tokenizer_path='/models/kimi', kv_cache_dtype='fp8_e4m3', attention_backend='flashinfer'",
]


def test_every_secret_shape_is_scrubbed():
    missed = []
    for line, secret in corpus():
        out = redact_text(line)
        if secret in out or REDACTED not in out:
            missed.append((line, out))
    assert not missed, missed


@pytest.mark.parametrize("line", ORDINARY)
def test_ordinary_lines_stay_as_they_are(line: str):
    assert redact_text(line) == line


def test_redaction_is_fast_enough_for_logs():
    text = "\n".join(ORDINARY * 200 + [line for line, _ in corpus()] * 5)  # ~2000 lines
    t0 = time.perf_counter()
    out = redact_text(text)
    assert time.perf_counter() - t0 < 2.0
    assert out.count(REDACTED) >= len(corpus()) * 5
