"""Tests of the game-plan report: model and schema, markdown snapshots, HTML in Chromium, diff, live view."""
