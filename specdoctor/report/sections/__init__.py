"""The report's sections, one builder per section (`<id>_section(report) -> Section`), grouped by topic.

`specdoctor.report.doc` puts them in order and prunes empty columns; `cells` holds what they share.
"""
