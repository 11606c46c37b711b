"""The report's sections, one builder per section (`<id>_section(report, section) -> Section`, filling the empty
section it is handed), grouped by topic.

`specdoctor.report.doc.SECTIONS` is the one table of them (id, heading, builder), in order; `cells` holds what they
share.
"""
