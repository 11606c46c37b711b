# Sourced by both engines' wheelhouse builders (real_sglang/, real_vllm/): specdoctor's own dependencies for the
# device's Python 3.12 (the image has numpy, scipy, matplotlib, rich, typer, httpx, pyyaml, requests, click, anyio,
# attrs, packaging, xxhash: not carried). paramiko, cryptography, pynacl, bcrypt and invoke are left out: `--host
# local` never opens SSH (specdoctor.host.ssh is imported lazily).
#   sd_wheels DEST WORKDIR PLAT...   downloads them (pinned, no deps) into DEST
SD_WHEELS="langgraph==1.2.24 langgraph-checkpoint==4.3.2 langgraph-checkpoint-sqlite==3.1.2 langgraph-prebuilt==1.1.3
  langgraph-sdk==0.4.14 langchain-core==1.8.3 langchain-protocol==0.0.20 langsmith==0.15.1 aiosqlite==0.22.1
  sqlite-vec==0.1.9 ormsgpack==1.13.1 jsonpatch==1.48 jsonpointer==3.12 tenacity==9.2.1 uuid-utils==0.19.0
  requests-toolbelt==1.0.0 openai==3.57.0 gitpython==3.2.1 gitdb==4.0.12 smmap==5.0.3 unidiff==1.0.1
  mcp==2.3.0 mcp-types==2.3.0 sse-starlette==3.7.0 httpx2==2.16.2 httpcore2==2.16.2 pyjwt==2.15.1
  opentelemetry-api==1.45.2 truststore==0.10.5 websockets==17.4"
# the wheels specdoctor also needs that an engine's set may already carry (listed in sd/shared.txt when it does)
SD_SHARED="pydantic pydantic_core annotated_types typing_inspection typing_extensions jiter distro sniffio jsonschema
  jsonschema_specifications referencing rpds_py orjson zstandard starlette uvicorn python_multipart"

sd_wheels() {
  local dest=$1 work=$2; shift 2
  mkdir -p "$dest" "$work"
  # shellcheck disable=SC2086
  python3 -m pip download "$@" -d "$work" $SD_WHEELS 2>&1 | grep -E "ERROR" || true
  cp "$work"/*.whl "$dest"/
}

# sd_shared ENGINE_DIR SD_DIR: lists in SD_DIR/shared.txt the shared wheels ENGINE_DIR carries
sd_shared() {
  : > "$2/shared.txt"
  for n in $SD_SHARED; do ls "$1" | grep -E "^${n}-[0-9].*\.whl$" >> "$2/shared.txt" || true; done
}
