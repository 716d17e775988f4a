"""The chunked-body decoder: the same bytes as the body, however the wire is cut or framed."""

from __future__ import annotations

import random

import httpx
import pytest

from opensandbox_provider.execd._chunked import MAX_SIZE_LINE, ChunkedDecoder


def chunked(chunks: list[bytes], *, size_line=lambda size: b"%x" % size, trailer=b"") -> bytes:
    framed = [size_line(len(chunk)) + b"\r\n" + chunk + b"\r\n" for chunk in chunks]
    return b"".join(framed) + b"0\r\n" + trailer + b"\r\n"


def decode_in_pieces(wire: bytes, cuts: list[int]) -> tuple[bytes, ChunkedDecoder]:
    decoder = ChunkedDecoder()
    body = []
    start = 0
    for end in [*cuts, len(wire)]:
        body.append(decoder.feed(wire[start:end]))
        start = end
    return b"".join(body), decoder


def random_chunks(rng: random.Random) -> list[bytes]:
    # Data that looks like framing is the case a bulk pass could get wrong: CRLFs, digits,
    # a whole fake last chunk.
    alphabets = [b"x", b"ab\r\n", b"\r", b"\n", b"0\r\n\r\n", b"5\r\nhello\r\n", b"\x00\xff"]
    sizes = [1, 2, 5, 150, 150, 150, 4000, 70_000]
    chunks = []
    for _ in range(rng.randint(0, 400)):
        alphabet = rng.choice(alphabets)
        size = rng.choice(sizes)
        chunks.append((alphabet * (size // len(alphabet) + 1))[:size])
    return chunks


@pytest.mark.parametrize("seed", range(40))
def test_any_body_in_any_split_decodes_to_its_bytes(seed: int) -> None:
    rng = random.Random(seed)
    chunks = random_chunks(rng)
    size_line = rng.choice(
        [lambda n: b"%x" % n, lambda n: b"%X" % n, lambda n: b"%x;name=value" % n]
    )
    wire = chunked(chunks, size_line=size_line, trailer=rng.choice([b"", b"X-Trailer: 1\r\n"]))
    cuts = sorted(rng.sample(range(len(wire)), min(len(wire), rng.choice([0, 1, 5, 50, 500]))))

    body, decoder = decode_in_pieces(wire, cuts)

    assert body == b"".join(chunks)
    assert decoder.done


def test_execds_stream_of_small_chunks_decodes_in_one_feed() -> None:
    events = [b'{"type":"stdout","text":"line %d","timestamp":1}\n\n' % n for n in range(5000)]

    body, decoder = decode_in_pieces(chunked(events), [])

    assert body == b"".join(events)
    assert decoder.done


def test_a_chunk_holding_crlf_among_plain_ones_is_decoded_by_its_size() -> None:
    chunks = [b"a" * 100] * 100 + [b"3\r\nabc\r\n0\r\n\r\n"] + [b"b" * 100] * 100

    body, _ = decode_in_pieces(chunked(chunks), [])

    assert body == b"".join(chunks)


def test_nothing_after_the_last_chunk_is_read() -> None:
    decoder = ChunkedDecoder()

    body = decoder.feed(chunked([b"hello"]) + b"HTTP/1.1 200 OK\r\n")

    assert body == b"hello"
    assert decoder.done
    assert decoder.feed(b"more") == b""


def test_a_huge_chunk_streams_through_without_being_held() -> None:
    decoder = ChunkedDecoder()
    size = 64 * 1024 * 1024
    piece = b"x" * (1024 * 1024)

    assert decoder.feed(b"%x\r\n" % size) == b""
    passed = 0
    for _ in range(size // len(piece)):
        out = decoder.feed(piece)
        # Each piece comes straight back: the decoder keeps none of a chunk's data.
        assert out == piece
        passed += len(out)
    assert decoder.feed(b"\r\n0\r\n\r\n") == b""
    assert passed == size
    assert decoder.done


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (b"zz\r\nabc\r\n", "not a chunk-size line"),
        (b"-3\r\nabc\r\n", "not a chunk-size line"),
        (b"0x3\r\nabc\r\n", "not a chunk-size line"),
        (b"3\r\nabcXY", "not followed by CRLF"),
        (b"\r\n" * 3000, "not a chunk-size line"),
        (b"1" * (MAX_SIZE_LINE + 1), "chunk-size line too long"),
    ],
)
def test_a_malformed_body_is_a_protocol_error(wire: bytes, message: str) -> None:
    with pytest.raises(httpx.RemoteProtocolError, match=message):
        ChunkedDecoder().feed(wire)


def test_a_malformed_chunk_after_many_good_ones_is_still_caught() -> None:
    good = chunked([b"x" * 150] * 200)[: -len(b"0\r\n\r\n")]

    with pytest.raises(httpx.RemoteProtocolError, match="not followed by CRLF"):
        ChunkedDecoder().feed(good + b"3\r\nabcXY\r\n" + good)
