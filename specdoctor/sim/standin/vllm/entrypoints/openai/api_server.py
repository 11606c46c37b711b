"""`python -m vllm.entrypoints.openai.api_server --model M ...`: the (stand-in) vLLM OpenAI server."""

if __name__ == "__main__":
    import sys

    from vllm._front.server import main

    sys.exit(main(sys.argv[1:], entry="api_server"))
