"""The small part of the DNS wire format (RFC 1035) that the resolver and the egress proxy need.

Both only ever look at the first question of a query and at the A records of an answer, so
this is deliberately not a general DNS library.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Sequence
from dataclasses import dataclass

TYPE_A = 1
CLASS_IN = 1

RCODE_NOERROR = 0
RCODE_SERVFAIL = 2
RCODE_NXDOMAIN = 3
RCODE_REFUSED = 5

_HEADER = struct.Struct("!HHHHHH")
_FLAG_QR = 0x8000
_FLAG_AA = 0x0400
_FLAG_RD = 0x0100
_FLAG_RA = 0x0080
_OPCODE_MASK = 0x7800
# A compression pointer may point only backwards, so a name can never need more jumps than
# this; the bound stops a malicious pointer loop.
_MAX_POINTER_JUMPS = 64


@dataclass(frozen=True)
class Query:
    id: int
    flags: int
    name: str
    qtype: int
    qclass: int
    question: bytes

    @property
    def is_standard_query(self) -> bool:
        return self.flags & (_FLAG_QR | _OPCODE_MASK) == 0


def normalize_name(name: str) -> str:
    """DNS names compare case-insensitively, and a trailing dot only marks them as absolute."""
    return name.strip().rstrip(".").lower()


def _read_name(data: bytes, offset: int) -> tuple[str, int]:
    labels: list[str] = []
    end = None
    for _ in range(_MAX_POINTER_JUMPS):
        length = data[offset]
        if length & 0xC0 == 0xC0:
            if end is None:
                end = offset + 2
            offset = struct.unpack_from("!H", data, offset)[0] & 0x3FFF
            continue
        if length == 0:
            return ".".join(labels), end if end is not None else offset + 1
        labels.append(data[offset + 1 : offset + 1 + length].decode("ascii", "replace"))
        offset += 1 + length
    raise ValueError("DNS name has too many compression pointers")


def parse_query(data: bytes) -> Query:
    """Parse the header and first question; raises ValueError for anything malformed."""
    try:
        qid, flags, qdcount, _, _, _ = _HEADER.unpack_from(data)
        if qdcount < 1:
            raise ValueError("DNS message has no question")
        name, offset = _read_name(data, _HEADER.size)
        qtype, qclass = struct.unpack_from("!HH", data, offset)
    except (struct.error, IndexError) as exc:
        raise ValueError(f"truncated DNS message: {exc}") from exc
    question = data[_HEADER.size : offset + 4]
    return Query(qid, flags, normalize_name(name), qtype, qclass, question)


def build_response(query: Query, rcode: int, addresses: Sequence[str] = (), ttl: int = 60) -> bytes:
    """An authoritative answer to `query` carrying A records for `addresses`."""
    flags = _FLAG_QR | _FLAG_AA | _FLAG_RA | (query.flags & _FLAG_RD) | rcode
    records = b"".join(
        # 0xC00C points back at the question's name, which always starts right after the header.
        struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, ttl, 4) + ipaddress.IPv4Address(a).packed
        for a in addresses
    )
    header = _HEADER.pack(query.id, flags, 1, len(addresses), 0, 0)
    return header + query.question + records


def answer_addresses(data: bytes) -> list[tuple[str, int]]:
    """The (IPv4 address, TTL) pairs in a response's answer section."""
    _, _, qdcount, ancount, _, _ = _HEADER.unpack_from(data)
    offset = _HEADER.size
    for _ in range(qdcount):
        offset = _read_name(data, offset)[1] + 4
    found = []
    for _ in range(ancount):
        offset = _read_name(data, offset)[1]
        rtype, rclass, ttl, length = struct.unpack_from("!HHIH", data, offset)
        offset += 10
        if rtype == TYPE_A and rclass == CLASS_IN and length == 4:
            found.append((str(ipaddress.IPv4Address(data[offset : offset + 4])), ttl))
        offset += length
    return found


def rcode(data: bytes) -> int:
    return _HEADER.unpack_from(data)[1] & 0x000F
