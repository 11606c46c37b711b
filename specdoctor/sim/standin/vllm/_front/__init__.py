"""The stand-in vLLM server front: flags, start-up, HTTP routes, stats lines; the model is the shared twin."""
