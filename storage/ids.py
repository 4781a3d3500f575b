"""One spelling for every id a user owns (conversations, threads, task files).

A UUID can be written many ways: upper or lower case, with or without hyphens, in braces, as a
``urn:uuid:`` URN. LangGraph hands out thread ids hyphenated and lower case, the task files of
seed 000 are named by 32 hex digits, and a client may send any of them as
``context.conversation_id``. When the ownership check compared the raw string while the file
name folded the spelling, another user could reach a conversation's task list by re-spelling
its id. So every id is put in its canonical form here, before anything compares it, names a
file or a row: the spellings of one UUID are one id (one owner, one file, one set of rows).

Anything that is not a UUID spelling is an id of its own, kept exactly as sent (``Conv-1`` and
``conv-1`` are two conversations, each with its own owner and file). Only the spellings listed
above count: ``uuid.UUID`` also reads ``+``-signed digits and ``_`` separators, which are other
strings, not other spellings.
"""

from __future__ import annotations

import re

_HEX32 = r"[0-9a-fA-F]{32}"
_HYPHENATED = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_UUID_SPELLING = re.compile(
    rf"(?:[uU][rR][nN]:[uU][uU][iI][dD]:)?(?P<bare>{_HYPHENATED}|{_HEX32})"
    rf"|\{{(?P<braced>{_HYPHENATED}|{_HEX32})\}}"
)


def canonical_uuid(value: str) -> str | None:
    """The lower-case hyphenated form of ``value`` when it spells a UUID, else None."""
    match = _UUID_SPELLING.fullmatch(value)
    if match is None:
        return None
    digits = (match.group("bare") or match.group("braced")).replace("-", "").lower()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def canonical_id(value: str) -> str:
    """The one form of an owned id: a UUID in any spelling becomes lower case and hyphenated
    (the form LangGraph gives thread ids); any other id stays exactly as it is."""
    return canonical_uuid(value) or value
