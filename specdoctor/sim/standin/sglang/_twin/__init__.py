"""Internals of the stand-in SGLang that the twin (specdoctor's simulated GPU host) runs as real processes."""
