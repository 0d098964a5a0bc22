"""SASL/PLAIN parsing (RFC 4616): the key id and secret, and every malformed token refused."""

from __future__ import annotations

import pytest

from gateway.auth.plain import MAX_IDENTITY_BYTES, PlainCredentials, PlainError, parse_plain

pytestmark = pytest.mark.unit
SECRET = "s3cretS3cretS3cret"


def test_username_is_the_key_id_and_password_the_secret() -> None:
    assert parse_plain(b"\0KEYID0000000001\0" + SECRET.encode()) == PlainCredentials(
        "KEYID0000000001", SECRET
    )


def test_an_authzid_equal_to_the_username_is_accepted() -> None:
    parsed = parse_plain(b"KEY1\0KEY1\0" + SECRET.encode())
    assert parsed.key_id == "KEY1"


def test_the_secret_stays_out_of_repr() -> None:
    assert SECRET not in repr(parse_plain(b"\0KEY1\0" + SECRET.encode()))


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (b"", "not_three_fields"),
        (b"KEY1\0" + SECRET.encode(), "not_three_fields"),
        (b"\0KEY1\0" + SECRET.encode() + b"\0extra", "not_three_fields"),
        (b"\0\0" + SECRET.encode(), "empty_username"),
        (b"\0KEY1\0", "empty_password"),
        (b"OTHER\0KEY1\0" + SECRET.encode(), "authzid_differs"),
        (b"\0KEY\xff\0" + SECRET.encode(), "username_not_utf8"),
        (b"\0KEY1\0\xc3\x28", "password_not_utf8"),
        (b"\0" + b"K" * (MAX_IDENTITY_BYTES + 1) + b"\0x", "username_too_long"),
        (b"\0KEY1\0" + b"x" * 257, "password_too_long"),
        (b"\0KEY1\0" + b"x" * 10_000, "message_too_long"),
    ],
)
def test_malformed_tokens_are_refused(token: bytes, reason: str) -> None:
    with pytest.raises(PlainError) as refused:
        parse_plain(token)
    assert refused.value.reason == reason


def test_a_refusal_never_carries_the_secret() -> None:
    with pytest.raises(PlainError) as refused:
        parse_plain(b"OTHER\0KEY1\0" + SECRET.encode())
    assert SECRET not in str(refused.value)
