"""How command output becomes events, seen through the real SDK
(docs/execd-wire.rst, wire-lines, wire-ordering)."""

from opensandbox import SandboxSync

from tests.conformance.commands import stdout_lines


def test_each_output_line_is_one_event_without_its_delimiter(sandbox: SandboxSync):
    assert stdout_lines(sandbox, "printf 'one\\ntwo\\nthree\\n'") == ["one", "two", "three"]


def test_blank_line_arrives_as_a_newline_event(sandbox: SandboxSync):
    assert stdout_lines(sandbox, "printf 'a\\n\\nb\\n\\n\\n'") == ["a", "\n", "b", "\n", "\n"]


def test_cr_lf_and_crlf_all_end_a_line(sandbox: SandboxSync):
    texts = stdout_lines(sandbox, "printf 'lf\\ncrlf\\r\\ncr\\r50%%\\r100%%\\n\\r\\n'")

    assert texts == ["lf", "crlf", "cr", "50%", "100%", "\n"]


def test_a_crlf_split_across_polls_is_still_one_terminator(sandbox: SandboxSync):
    texts = stdout_lines(sandbox, "printf 'a\\r'; sleep 0.5; printf '\\nb\\n'")

    assert texts == ["a", "b"]


def test_a_partial_line_is_held_until_its_newline(sandbox: SandboxSync):
    texts = stdout_lines(sandbox, "printf 'part1-'; sleep 0.5; printf 'part2\\n'")

    assert texts == ["part1-part2"]


def test_an_unfinished_last_line_is_flushed_at_exit(sandbox: SandboxSync):
    assert stdout_lines(sandbox, "printf 'first\\nno newline'") == ["first", "no newline"]


def test_whitespace_inside_lines_is_kept(sandbox: SandboxSync):
    assert stdout_lines(sandbox, "printf '   \\n\\tx \\n'") == ["   ", "\tx "]


def test_invalid_utf8_arrives_as_one_replacement_character_per_byte(sandbox: SandboxSync):
    texts = stdout_lines(sandbox, "printf '\\377\\376bad\\n\\342\\202x\\n'")

    assert texts == ["\ufffd\ufffdbad", "\ufffd\ufffdx"]


def test_html_characters_and_non_ascii_text_survive(sandbox: SandboxSync):
    assert stdout_lines(sandbox, "echo '<tag>&amp; é ✓'") == ["<tag>&amp; é ✓"]


def test_stderr_lines_are_events_of_their_own_stream(sandbox: SandboxSync):
    execution = sandbox.commands.run("echo out; echo err1 >&2; echo err2 >&2")

    assert [message.text for message in execution.logs.stdout] == ["out"]
    assert [message.text for message in execution.logs.stderr] == ["err1", "err2"]
    assert all(message.is_error for message in execution.logs.stderr)


def test_each_stream_keeps_its_own_order_when_they_interleave(sandbox: SandboxSync):
    execution = sandbox.commands.run(
        "for i in 1 2 3 4 5; do echo o$i; echo e$i >&2; sleep 0.05; done"
    )

    assert [message.text for message in execution.logs.stdout] == [f"o{i}" for i in range(1, 6)]
    assert [message.text for message in execution.logs.stderr] == [f"e{i}" for i in range(1, 6)]


def test_a_long_line_arrives_as_a_single_event(sandbox: SandboxSync):
    texts = stdout_lines(sandbox, "head -c 200000 /dev/zero | tr '\\0' x; echo")

    assert texts == ["x" * 200_000]


def test_many_lines_from_one_read_each_arrive_as_their_own_event_in_order(sandbox: SandboxSync):
    texts = stdout_lines(sandbox, "seq 1 100000")

    assert texts == [str(number) for number in range(1, 100_001)]
