"""Statistics: the Pinpoint-style comparator and summaries."""
