"""The one `@@name` section reader that the host-script tools share (it replaced six local copies)."""

from __future__ import annotations

from specdoctor.parsers.sections import split_sections


def test_each_marker_starts_a_section_and_lines_before_the_first_are_dropped() -> None:
    text = "noise\n@@os\nLinux 6.1\n\n@@gpus\n0, NVIDIA H100, 550\n"
    assert split_sections(text) == {"os": ["Linux 6.1", ""], "gpus": ["0, NVIDIA H100, 550"]}


def test_lines_before_the_first_marker_go_to_the_named_first_section() -> None:
    text = "123 (python) S 1 123\n@@argv\nYQBi\n@@cwd\n/srv\n"
    assert split_sections(text, first="stat") == {"stat": ["123 (python) S 1 123"], "argv": ["YQBi"],
                                                  "cwd": ["/srv"]}
    assert split_sections("", first="stat") == {"stat": []}


def test_a_marker_is_an_identifier_alone_on_its_line() -> None:
    # the startup-hook probe prints '@@hooks-json {...}' inside its section: content, not a new section
    text = "@@hooks\n@@hooks-json [{\"name\": \"X\"}]\n  @@etc_nccl_conf  \nNCCL_PROTO=LL\n@@ two words\n@@\n"
    assert split_sections(text) == {"hooks": ['@@hooks-json [{"name": "X"}]'],
                                    "etc_nccl_conf": ["NCCL_PROTO=LL", "@@ two words", "@@"]}


def test_an_empty_section_is_present_and_a_repeated_name_starts_afresh() -> None:
    assert split_sections("@@site\n@@conf\na=1\n@@conf\nb=2\n") == {"site": [], "conf": ["b=2"]}


def test_after_the_last_marker_every_line_is_content() -> None:
    # a server log's tail is the user's text: a line such as '@@x' in it is not a section of the script
    text = "1 (python) S 1 1\n@@tail\nstarting\n@@x\ndone\n"
    assert split_sections(text, first="stats", last="tail") == {"stats": ["1 (python) S 1 1"],
                                                                "tail": ["starting", "@@x", "done"]}
    assert split_sections(text, first="stats") == {"stats": ["1 (python) S 1 1"], "tail": ["starting"],
                                                   "x": ["done"]}
