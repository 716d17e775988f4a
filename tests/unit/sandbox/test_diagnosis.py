"""Naming why a sandbox never became ready from the pod's events, as the server lists them."""

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider.sandbox._diagnosis import diagnosed, explain_refusal
from tests.unit.test_errors import api_error

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


def test_an_image_the_cluster_could_not_pull_is_named_as_a_docker_servers_refusal_is():
    told = diagnosed(PULL, image="127.0.0.1:5000/private/sandbox:1", registry_conn_id=None)
    assert "could not pull image 127.0.0.1:5000/private/sandbox:1" in told
    assert "pulled from 127.0.0.1:5000 without a login" in told and "registry_conn_id" in told
    assert "401 Unauthorized" in told
    told = diagnosed(PULL, image="127.0.0.1:5000/private/sandbox:1", registry_conn_id="reg")
    assert "with the login of connection 'reg'" in told
    assert "prepare the snapshot again" in diagnosed(PULL, image=None)


def test_a_pod_no_node_can_hold_is_named():
    assert "No node of the cluster could take" in diagnosed(UNSCHEDULABLE)


def test_events_that_name_no_known_cause_add_nothing():
    assert diagnosed("[N/A] Normal   Pulled   Container image already present\n") == ""
    assert diagnosed("(no events)") == ""


def test_an_event_line_is_quoted_on_one_line_and_bounded():
    told = diagnosed("Warning Failed Error: ErrImagePull \u2028 injected" + "x" * 1000)
    assert "\u2028" not in told and len(told) < 700


# The Kubernetes runtime's refusals, with the server's codes and words (services/k8s of
# opensandbox-server).
@pytest.mark.parametrize(
    ("status", "code", "words", "told"),
    [
        (400, "INVALID_PARAMETER", "Sandbox s is unschedulable: 0/1 nodes", "No node of the"),
        (403, "KUBERNETES::QUOTA_EXCEEDED", "exceeded quota", "ResourceQuota has no room"),
        (504, "KUBERNETES::POD_READY_TIMEOUT", "Timeout waiting", "got no address"),
        (500, "KUBERNETES::POD_FAILED", "Sandbox s failed", "pod failed as it started"),
    ],
)
def test_each_refusal_of_the_kubernetes_runtime_says_what_to_do(status, code, words, told):
    explained = explain_refusal(api_error(status, code, words), image=None, registry_conn_id=None)
    assert isinstance(explained, SandboxTerminalError)
    assert words in str(explained) and told in str(explained)


def test_any_other_refusal_is_left_as_it_is():
    refused = api_error(400, "INVALID_PARAMETER", "bad")
    assert explain_refusal(refused, image="i", registry_conn_id=None) is None
    elsewhere = RuntimeError("not from the server")
    assert explain_refusal(elsewhere, image=None, registry_conn_id=None) is None


def test_a_pod_that_failed_on_its_images_pull_is_said_as_a_docker_servers_refusal_is():
    words = "Sandbox s failed: 1/1 observed pods failed; primary reason=ErrImagePull"
    error = api_error(500, "KUBERNETES::POD_FAILED", words)
    explained = explain_refusal(error, image="r.example:5000/i:1", registry_conn_id="reg")
    assert "could not pull image r.example:5000/i:1" in str(explained)
    assert "pulled from r.example:5000 with the login of connection 'reg'" in str(explained)
