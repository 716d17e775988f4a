"""Naming why a sandbox never became ready from the pod's events, as the server lists them."""

from opensandbox_provider.sandbox._diagnosis import diagnosed

# Lines as the server's Kubernetes diagnostics print them: time, type, reason, message.
PULL = (
    "[2026-12-06 05:01:02+00:00] Normal   Scheduled            Successfully assigned pod\n"
    "[2026-12-06 05:01:03+00:00] Warning  Failed               Failed to pull image "
    '"127.0.0.1:5000/private/sandbox:1": 401 Unauthorized\n'
    "[2026-12-06 05:01:04+00:00] Warning  Failed               Error: ImagePullBackOff\n"
)
UNSCHEDULABLE = (
    "[N/A] Warning  FailedScheduling     0/1 nodes are available: 1 Insufficient memory.\n"
)


def test_an_image_the_cluster_could_not_pull_is_named_with_what_to_do():
    told = diagnosed(PULL)
    assert "could not pull the sandbox's image" in told and "registry_conn_id" in told
    assert "401 Unauthorized" in told


def test_a_pod_no_node_can_hold_is_named():
    assert "No node of the cluster could take" in diagnosed(UNSCHEDULABLE)


def test_events_that_name_no_known_cause_add_nothing():
    assert diagnosed("[N/A] Normal   Pulled   Container image already present\n") == ""
    assert diagnosed("(no events)") == ""


def test_an_event_line_is_quoted_on_one_line_and_bounded():
    told = diagnosed("Warning Failed Error: ErrImagePull \u2028 injected" + "x" * 1000)
    assert "\u2028" not in told and len(told) < 700
