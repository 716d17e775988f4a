"""Reading the kernel's out-of-memory count from a sandbox's cgroup files."""

from opensandbox_provider.operators._memory import counted

V1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"
V2 = "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n"


def test_both_cgroup_versions_files_give_their_count():
    assert counted(V1) == 2
    assert counted(V2) == 1


def test_the_group_kill_line_and_other_counters_are_not_the_count():
    assert counted("oom_group_kill 5\noom 3\n") is None


def test_no_file_read_gives_no_verdict():
    assert counted("") is None
    assert counted("oom_kill many\n") is None
