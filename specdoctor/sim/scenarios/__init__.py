"""Built-in scenarios (YAML), loaded with importlib.resources."""
