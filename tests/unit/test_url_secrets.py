"""Credentials in URLs found for the masker and hidden from the messages that quote them."""

from __future__ import annotations

import pytest

from opensandbox_provider._url_secrets import url_secrets, without_url_secrets


@pytest.mark.parametrize(
    ("text", "secrets"),
    [
        ("--index-url https://deploy:hunter2-index@pypi.example/simple", ["hunter2-index"]),
        ("--extra-index-url=https://ghp_tokenonly@git.example/simple", ["ghp_tokenonly"]),
        ("pkg @ https://files.example/pkg.whl?token=abc123def&v=2", ["abc123def"]),
        (
            "https://bucket.example/p.whl?X-Amz-Signature=f00d&X-Amz-Credential=AKIA%2F1",
            ["f00d", "AKIA%2F1", "AKIA/1"],
        ),
        ("git+https://user:p%40ss@git.example/repo.git", ["p%40ss", "p@ss"]),
        ("https://user:p@ss@host.example/simple", ["p@ss"]),
    ],
)
def test_each_credential_of_a_url_is_found_as_written_and_decoded(text, secrets) -> None:
    assert url_secrets(text) == secrets
    hidden = without_url_secrets(text)
    assert all(secret not in hidden for secret in secrets)
    assert "***" in hidden


@pytest.mark.parametrize(
    "text",
    [
        "pandas==2.2.3",
        "--index-url https://pypi.example/simple",
        "git+ssh://git@github.example/org/repo.git@v1.0",
        "pkg @ https://files.example/pkg.whl?version=2#sha256=00ff",
        "--trusted-host pypi.example",
    ],
)
def test_text_without_a_credential_is_left_as_it_is(text) -> None:
    assert url_secrets(text) == []
    assert without_url_secrets(text) == text


def test_only_the_credentials_are_hidden_and_the_rest_of_a_command_stays_readable() -> None:
    command = "pip install --index-url https://deploy:hunter2-index@pypi.example/simple pandas"
    assert without_url_secrets(command) == (
        "pip install --index-url https://deploy:***@pypi.example/simple pandas"
    )
