"""Volumes decided without a server: what is refused, what is sent, how a refusal reads."""

from __future__ import annotations

import copy

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxTerminalError
from opensandbox.exceptions import SandboxApiException
from opensandbox.exceptions.sandbox import SandboxError as SdkError

from opensandbox_provider.sandbox import HostPath, NamedVolume, OpenSandboxBackend, _volumes


def test_mounts_are_read_only_unless_they_say_otherwise() -> None:
    sent = _volumes.sdk_volumes([NamedVolume("data", "/data"), HostPath("/srv/in", "/in")])

    assert sent is not None
    assert [volume.read_only for volume in sent] == [True, True]


def test_a_named_volume_must_exist_unless_it_is_created_with_the_sandbox() -> None:
    kept, scratch = (
        _volumes.sdk_volumes(
            [
                NamedVolume("data", "/data"),
                NamedVolume("tmp", "/scratch", created_with_sandbox=True),
            ]
        )
        or []
    )

    assert kept.pvc is not None and not kept.pvc.create_if_not_exists
    assert not kept.pvc.delete_on_sandbox_termination
    assert scratch.pvc is not None and scratch.pvc.create_if_not_exists
    assert scratch.pvc.delete_on_sandbox_termination


def test_each_mount_gets_its_own_name_in_the_request() -> None:
    sent = _volumes.sdk_volumes([NamedVolume("a", "/a"), NamedVolume("a", "/b")]) or []

    assert len({volume.name for volume in sent}) == 2


def test_no_volumes_send_none() -> None:
    assert _volumes.sdk_volumes(()) is None


@pytest.mark.parametrize(
    ("volumes", "message"),
    [
        (["data:/data"], "NamedVolume"),
        ([NamedVolume("", "/data")], "names no volume"),
        ([HostPath("srv/in", "/in")], "must be absolute"),
        ([NamedVolume("data", "data")], "mount_path must be an absolute path"),
        ([NamedVolume("a", "/data"), HostPath("/srv", "/data/")], "Two volumes are mounted"),
    ],
)
def test_a_mount_the_server_would_refuse_fails_when_the_dag_is_parsed(volumes, message) -> None:
    with pytest.raises(ValueError, match=message):
        OpenSandboxBackend(volumes=volumes)


def test_the_volumes_survive_airflows_deep_copy_of_a_task() -> None:
    volumes = [NamedVolume("data", "/data")]
    assert copy.deepcopy(OpenSandboxBackend(volumes=volumes)).volumes == tuple(volumes)


def refusal(code: str, message: str) -> SandboxApiException:
    return SandboxApiException(
        message=f"Create sandbox failed: {message}",
        status_code=400,
        error=SdkError(code=code, message=message),
    )


def test_a_host_path_refusal_names_the_server_setting() -> None:
    error = refusal("VOLUME::HOST_PATH_NOT_ALLOWED", "Host path '/srv' is not allowed")

    explained = _volumes.explain_refusal(error, [HostPath("/srv", "/in")])

    assert isinstance(explained, SandboxTerminalError)
    assert "[storage] allowed_host_paths" in str(explained)
    assert "Host path '/srv' is not allowed" in str(explained)


def test_a_missing_volume_refusal_says_how_to_make_one() -> None:
    error = refusal("VOLUME::PVC_NOT_FOUND", "Docker named volume 'data' does not exist")

    explained = _volumes.explain_refusal(error, [NamedVolume("data", "/data")])

    assert "created_with_sandbox=True" in str(explained)


def test_a_refusal_that_is_not_about_volumes_is_left_to_the_others() -> None:
    error = refusal("SANDBOX::INVALID", "networkPolicy needs the sidecar")

    assert _volumes.explain_refusal(error, [NamedVolume("data", "/data")]) is None
    assert _volumes.explain_refusal(error, []) is None
