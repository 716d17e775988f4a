"""The file and directory endpoints (docs/execd-wire.rst, wire-upload, wire-download, wire-range,
wire-info, wire-listing)."""

import httpx
import pytest
from opensandbox import SandboxSync
from opensandbox.exceptions import SandboxApiException, SandboxConnectionException
from opensandbox.models.filesystem import (
    DirectoryListEntry,
    MoveEntry,
    SearchEntry,
    WriteEntry,
)

from tests.conformance.wire import ExecdWire

TEN_BYTES = b"0123456789"


def test_upload_creates_parents_and_applies_decimal_coded_octal_mode(sandbox: SandboxSync):
    sandbox.files.write_files([WriteEntry(path="/tmp/new/deeper/file.txt", data="x", mode=640)])

    info = sandbox.files.get_file_info(["/tmp/new/deeper/file.txt"])["/tmp/new/deeper/file.txt"]
    assert info.mode == 640
    assert info.entry_type == "file"


def test_upload_makes_the_lexical_parents_and_opens_the_path_as_given(sandbox: SandboxSync):
    # Seen on the real execd: through a missing directory and "..", the parent made is the
    # cleaned one (/tmp/lex), and opening /tmp/lex/missing/../f then fails.
    with pytest.raises(SandboxApiException) as raised:
        sandbox.files.write_files([WriteEntry(path="/tmp/lex/missing/../f.txt", data="x")])

    assert raised.value.status_code == 500
    assert "no such file or directory" in str(raised.value)
    listed = sandbox.commands.run("ls -a /tmp/lex").logs.stdout
    assert [line.text for line in listed] == [".", ".."]


def test_upload_mode_defaults_to_755(sandbox: SandboxSync):
    sandbox.files.write_file("/tmp/default-mode", "x")

    assert sandbox.files.get_file_info(["/tmp/default-mode"])["/tmp/default-mode"].mode == 755


def test_upload_overwrites_an_existing_file(sandbox: SandboxSync):
    sandbox.files.write_file("/tmp/f", "a much longer first version")
    sandbox.files.write_file("/tmp/f", "short")

    assert sandbox.files.read_file("/tmp/f") == "short"


def test_upload_writes_every_pair_of_a_multipart_request(sandbox: SandboxSync):
    sandbox.files.write_files(
        [
            WriteEntry(path="/tmp/one", data=b"\x00\x01binary\r\n"),
            WriteEntry(path="/tmp/two", data="text é"),
        ]
    )

    assert sandbox.files.read_bytes("/tmp/one") == b"\x00\x01binary\r\n"
    assert sandbox.files.read_file("/tmp/two") == "text é"


def test_upload_sets_owner_and_group_by_name(sandbox: SandboxSync):
    sandbox.files.write_files(
        [WriteEntry(path="/tmp/owned", data="x", owner="nobody", group="nogroup")]
    )

    info = sandbox.files.get_file_info(["/tmp/owned"])["/tmp/owned"]
    assert (info.owner, info.group) == ("nobody", "nogroup")


def test_upload_without_file_parts_is_a_400_json_error(wire: ExecdWire):
    response = wire.client.post(
        "/files/upload",
        files={"metadata": ("metadata", b'{"path": "/tmp/x"}', "application/json")},
    )

    assert response.status_code == 400
    assert response.json() == {"code": "INVALID_FILE_CONTENT", "message": "file is missing"}


def test_download_answers_200_with_the_whole_file(sandbox: SandboxSync, wire: ExecdWire):
    sandbox.files.write_file("/tmp/ten", TEN_BYTES)

    response = wire.get("/files/download", params={"path": "/tmp/ten"})

    assert response.status_code == 200
    assert response.content == TEN_BYTES
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"] == 'attachment; filename="ten"'
    assert response.headers["accept-ranges"] == "bytes"
    assert sandbox.files.read_bytes("/tmp/ten") == TEN_BYTES


def test_a_file_that_shrinks_while_it_is_sent_ends_the_body_short_never_silent(
    sandbox: SandboxSync, wire: ExecdWire
):
    # Far more than the socket buffers hold, so most of it is unsent when the file is cut.
    size = 128 * 1024 * 1024
    sandbox.commands.run(f"head -c {size} /dev/zero > /tmp/shrinking")
    # A silent body would end in a ReadTimeout after this long, not in a body cut short.
    silence = httpx.Timeout(30)
    download = {"params": {"path": "/tmp/shrinking"}, "timeout": silence}
    with wire.client.stream("GET", "/files/download", **download) as response:
        assert response.headers["content-length"] == str(size)
        chunks = response.iter_raw()
        received = len(next(chunks))
        sandbox.commands.run("truncate -s 1000 /tmp/shrinking")
        with pytest.raises(httpx.RemoteProtocolError):
            for chunk in chunks:
                received += len(chunk)
    assert received < size


def test_range_download_answers_206_and_416(sandbox: SandboxSync, wire: ExecdWire):
    sandbox.files.write_file("/tmp/ten", TEN_BYTES)

    def download(range_header: str):
        return wire.get(
            "/files/download", params={"path": "/tmp/ten"}, headers={"Range": range_header}
        )

    cases = {
        "bytes=0-3": ("bytes 0-3/10", b"0123"),
        "bytes=-3": ("bytes 7-9/10", b"789"),
        "bytes=7-": ("bytes 7-9/10", b"789"),
        "bytes=5-100": ("bytes 5-9/10", b"56789"),
        "bytes=0-1,4-5": ("bytes 0-1/10", b"01"),
        "bytes=0-9": ("bytes 0-9/10", TEN_BYTES),
    }
    for range_header, (content_range, body) in cases.items():
        response = download(range_header)
        assert (response.status_code, response.headers["content-range"], response.content) == (
            206,
            content_range,
            body,
        ), range_header

    unsatisfiable = download("bytes=20-")
    assert unsatisfiable.status_code == 416
    assert unsatisfiable.headers["content-type"] == "text/plain; charset=utf-8"
    assert unsatisfiable.headers["content-range"] == "bytes */10"
    assert unsatisfiable.text == "invalid range: failed to overlap\n"


def test_the_sdk_reads_a_range_and_raises_on_416(sandbox: SandboxSync):
    sandbox.files.write_file("/tmp/ten", TEN_BYTES)

    assert sandbox.files.read_bytes("/tmp/ten", range_header="bytes=2-4") == b"234"
    with pytest.raises(SandboxApiException) as refused:
        sandbox.files.read_bytes("/tmp/ten", range_header="bytes=20-")
    assert refused.value.status_code == 416


def test_a_malformed_range_breaks_the_response_instead_of_answering_416(sandbox: SandboxSync):
    sandbox.files.write_file("/tmp/long", b"x" * 100)

    with pytest.raises(SandboxConnectionException):
        sandbox.files.read_bytes("/tmp/long", range_header="bytes=abc")


def test_a_range_on_an_empty_file_answers_200(sandbox: SandboxSync, wire: ExecdWire):
    sandbox.files.write_file("/tmp/empty", b"")

    response = wire.get(
        "/files/download", params={"path": "/tmp/empty"}, headers={"Range": "bytes=0-"}
    )

    assert (response.status_code, response.content) == (200, b"")


def test_downloading_a_missing_file_is_a_404_json_error(sandbox: SandboxSync, wire: ExecdWire):
    response = wire.get("/files/download", params={"path": "/tmp/missing"})

    assert response.status_code == 404
    assert response.json() == {
        "code": "FILE_NOT_FOUND",
        "message": "file not found. open /tmp/missing: no such file or directory",
    }
    with pytest.raises(SandboxApiException) as refused:
        sandbox.files.read_file("/tmp/missing")
    assert refused.value.status_code == 404


def make_tree(sandbox: SandboxSync) -> None:
    sandbox.commands.run(
        "mkdir -p /tmp/tree/b/inner /tmp/tree/a /tmp/elsewhere && "
        "touch /tmp/tree/c.txt /tmp/tree/b/inner/deep.txt /tmp/tree/a/x.py && "
        "touch /tmp/elsewhere/hidden && "
        "ln -s /tmp/elsewhere /tmp/tree/link"
    )


def test_list_excludes_the_root_and_orders_depth_first_by_name_with_absolute_paths(
    sandbox: SandboxSync,
):
    make_tree(sandbox)

    entries = sandbox.files.list_directory(DirectoryListEntry(path="/tmp/tree", depth=3))

    assert [entry.path for entry in entries] == [
        "/tmp/tree/a",
        "/tmp/tree/a/x.py",
        "/tmp/tree/b",
        "/tmp/tree/b/inner",
        "/tmp/tree/b/inner/deep.txt",
        "/tmp/tree/c.txt",
        "/tmp/tree/link",
    ]


def test_list_reports_symlinks_without_following_them(sandbox: SandboxSync):
    make_tree(sandbox)

    entries = sandbox.files.list_directory(DirectoryListEntry(path="/tmp/tree", depth=5))

    link = next(entry for entry in entries if entry.path == "/tmp/tree/link")
    assert link.entry_type == "symlink"
    assert not any(entry.path.startswith("/tmp/tree/link/") for entry in entries)


def test_list_depth_limits_how_far_it_descends(sandbox: SandboxSync):
    make_tree(sandbox)

    default = sandbox.files.list_directory(DirectoryListEntry(path="/tmp/tree"))
    nothing = sandbox.files.list_directory(DirectoryListEntry(path="/tmp/tree", depth=0))

    assert [entry.path for entry in default] == [
        "/tmp/tree/a",
        "/tmp/tree/b",
        "/tmp/tree/c.txt",
        "/tmp/tree/link",
    ]
    assert nothing == []


def test_listing_a_file_or_a_missing_path_is_refused(sandbox: SandboxSync, wire: ExecdWire):
    make_tree(sandbox)

    not_a_directory = wire.get("/directories/list", params={"path": "/tmp/tree/c.txt"})
    missing = wire.get("/directories/list", params={"path": "/tmp/nope"})
    a_link = wire.get("/directories/list", params={"path": "/tmp/tree/link"})

    assert not_a_directory.status_code == 400
    assert not_a_directory.json() == {
        "code": "INVALID_REQUEST_BODY",
        "message": "path is not a directory: /tmp/tree/c.txt",
    }
    assert missing.status_code == 404
    assert missing.json()["code"] == "FILE_NOT_FOUND"
    assert a_link.status_code == 400
    assert (
        a_link.json()["message"] == "path is a symbolic link, refusing to traverse: /tmp/tree/link"
    )


def test_info_is_keyed_by_the_requested_path_and_does_not_follow_symlinks(sandbox: SandboxSync):
    make_tree(sandbox)

    infos = sandbox.files.get_file_info(["/tmp/tree/link", "/tmp/tree/./c.txt"])

    assert set(infos) == {"/tmp/tree/link", "/tmp/tree/./c.txt"}
    assert infos["/tmp/tree/link"].entry_type == "symlink"
    assert infos["/tmp/tree/link"].size == len("/tmp/elsewhere")
    assert infos["/tmp/tree/./c.txt"].path == "/tmp/tree/c.txt"


def test_info_of_a_missing_path_is_a_404_with_code_and_message(sandbox: SandboxSync):
    with pytest.raises(SandboxApiException) as refused:
        sandbox.files.get_file_info(["/tmp", "/tmp/missing"])

    assert refused.value.status_code == 404
    assert refused.value.error.code == "FILE_NOT_FOUND"
    assert "lstat /tmp/missing: no such file or directory" in refused.value.error.message


def test_directories_report_their_inode_size_and_permission_bits(sandbox: SandboxSync):
    info = sandbox.files.get_file_info(["/tmp"])["/tmp"]

    assert info.entry_type == "directory"
    assert info.size > 0
    assert info.mode == 777  # /tmp is 1777; only the permission bits are reported


def test_move_creates_parents_and_refuses_an_existing_destination(sandbox: SandboxSync):
    sandbox.files.write_file("/tmp/src", "moved")
    sandbox.files.write_file("/tmp/taken", "stays")

    sandbox.files.move_files([MoveEntry(src="/tmp/src", dest="/tmp/new/parent/dest")])
    with pytest.raises(SandboxApiException) as refused:
        sandbox.files.move_files([MoveEntry(src="/tmp/new/parent/dest", dest="/tmp/taken")])

    assert sandbox.files.read_file("/tmp/new/parent/dest") == "moved"
    assert refused.value.status_code == 500
    assert (
        refused.value.error.message
        == "error accessing file: destination path already exists: /tmp/taken"
    )
    assert sandbox.files.read_file("/tmp/taken") == "stays"


def test_moving_a_missing_source_is_a_404(sandbox: SandboxSync):
    with pytest.raises(SandboxApiException) as refused:
        sandbox.files.move_files([MoveEntry(src="/tmp/absent", dest="/tmp/anywhere")])

    assert refused.value.status_code == 404
    assert refused.value.error.code == "FILE_NOT_FOUND"


def test_delete_files_removes_files_ignores_missing_ones_and_refuses_directories(
    sandbox: SandboxSync,
):
    sandbox.files.write_file("/tmp/doomed", "x")

    sandbox.files.delete_files(["/tmp/doomed", "/tmp/never-existed"])
    with pytest.raises(SandboxApiException) as refused:
        sandbox.files.delete_files(["/tmp"])

    assert not sandbox.files.search(SearchEntry(path="/tmp", pattern="doomed"))
    assert refused.value.status_code == 500
    assert refused.value.error.message == "error removing file /tmp. path is a directory: /tmp"


def test_delete_directories_removes_whole_trees(sandbox: SandboxSync):
    make_tree(sandbox)

    sandbox.files.delete_directories(["/tmp/tree", "/tmp/never-existed"])

    with pytest.raises(SandboxApiException):
        sandbox.files.get_file_info(["/tmp/tree"])
    assert sandbox.files.get_file_info(["/tmp/elsewhere/hidden"])  # the link was not followed


def test_create_directories_makes_parents_and_sets_the_leaf_mode(sandbox: SandboxSync):
    sandbox.files.create_directories([WriteEntry(path="/tmp/made/leaf", mode=700)])

    infos = sandbox.files.get_file_info(["/tmp/made/leaf"])
    assert infos["/tmp/made/leaf"].entry_type == "directory"
    assert infos["/tmp/made/leaf"].mode == 700


def test_search_matches_base_names_at_any_depth_and_skips_directories(sandbox: SandboxSync):
    make_tree(sandbox)

    python_files = sandbox.files.search(SearchEntry(path="/tmp/tree", pattern="*.py"))
    everything = sandbox.files.search(SearchEntry(path="/tmp/tree", pattern="**"))

    assert [entry.path for entry in python_files] == ["/tmp/tree/a/x.py"]
    assert [entry.path for entry in everything] == [
        "/tmp/tree/a/x.py",
        "/tmp/tree/b/inner/deep.txt",
        "/tmp/tree/c.txt",
        "/tmp/tree/link",
    ]


def test_search_supports_alternatives_and_classes(sandbox: SandboxSync):
    make_tree(sandbox)

    found = sandbox.files.search(SearchEntry(path="/tmp/tree", pattern="{deep,x}.[pt]*"))

    assert [entry.path for entry in found] == ["/tmp/tree/a/x.py", "/tmp/tree/b/inner/deep.txt"]


def test_a_newline_in_a_downloaded_file_name_becomes_a_space_in_the_header(
    sandbox: SandboxSync, wire: ExecdWire
):
    sandbox.files.write_file("/tmp/line\nbreak.txt", TEN_BYTES)

    response = wire.get("/files/download", params={"path": "/tmp/line\nbreak.txt"})

    assert response.status_code == 200
    assert response.content == TEN_BYTES
    assert response.headers["content-disposition"] == 'attachment; filename="line break.txt"'


def test_names_that_are_not_utf8_are_listed_and_found_with_one_replacement_per_byte(
    sandbox: SandboxSync, wire: ExecdWire
):
    sandbox.commands.run("mkdir -p /tmp/odd && touch /tmp/odd/$(printf 'caf\\351\\377').txt")

    listed = wire.get("/directories/list", params={"path": "/tmp/odd"})
    found = wire.get("/files/search", params={"path": "/tmp/odd"})

    for response in (listed, found):
        assert response.status_code == 200
        # Go writes the escape \ufffd for each byte of the name that is not UTF-8.
        assert b'"path":"/tmp/odd/caf\\ufffd\\ufffd.txt"' in response.content
    entries = sandbox.files.list_directory(DirectoryListEntry(path="/tmp/odd"))
    assert [entry.path for entry in entries] == ["/tmp/odd/caf\ufffd\ufffd.txt"]
