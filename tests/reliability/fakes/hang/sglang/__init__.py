"""A stand-in SGLang that never becomes healthy (for the never-healthy case)."""
