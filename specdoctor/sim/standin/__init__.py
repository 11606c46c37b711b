"""Files copied into a simulated host sandbox: the stand-in sglang package and bin/ programs."""
