"""The game-plan report: one Report model, rendered to markdown, JSON, HTML and the terminal."""
