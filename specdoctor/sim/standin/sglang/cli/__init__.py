"""`sglang` console script (stand-in)."""
