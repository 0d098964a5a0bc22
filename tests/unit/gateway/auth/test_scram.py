"""The sans-io SCRAM server: full SHA-256/512 exchanges, and every malformed or wrong message."""

from __future__ import annotations

import pytest

from gateway.auth.scram import ScramError, ScramServer, ScramState, unescape_saslname
from tenancy.domain import ScramCredential
from tenancy.scram import make_credential
from tests.unit.gateway.auth.scram_client import ScramClient, b64

pytestmark = pytest.mark.unit
USER, SECRET = "KEYID00000000001", "correcthorsebatterystaple"
MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def credential(mechanism: str = "SCRAM-SHA-256", iterations: int = 4096) -> ScramCredential:
    return make_credential(mechanism, SECRET, iterations=iterations, salt=b"0123456789abcdef")


def started(mechanism: str = "SCRAM-SHA-256") -> tuple[ScramServer, ScramClient, bytes]:
    server = ScramServer(mechanism, nonce=lambda: "SERVERNONCE")
    client = ScramClient(mechanism, USER, SECRET)
    assert server.receive_client_first(client.first()) == USER
    return server, client, server.server_first(credential(mechanism))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_full_exchange_authenticates_both_sides(mechanism: str) -> None:
    server, client, server_first = started(mechanism)
    assert (
        server_first == f"r={client.nonce}SERVERNONCE,s={b64(b'0123456789abcdef')},i=4096".encode()
    )
    states = [server.state]
    server_final = server.receive_client_final(client.final(server_first))
    assert client.server_verified(server_final)
    states.append(server.state)
    assert states == [ScramState.CLIENT_FINAL, ScramState.COMPLETE]


def test_old_librdkafka_repeating_its_nonce_is_accepted_but_no_other_prefix() -> None:
    """librdkafka 2.0.2 (kcat 1.7.1) sends r=<client nonce><combined nonce>; Kafka took it."""
    server, client, server_first = started()
    combined = f"{client.nonce}SERVERNONCE"
    server_final = server.receive_client_final(
        client.final(server_first, nonce=client.nonce + combined)
    )
    assert client.server_verified(server_final)
    server, client, server_first = started()
    with pytest.raises(ScramError) as refused:
        server.receive_client_final(client.final(server_first, nonce="x" + combined))
    assert refused.value.reason == "nonce_mismatch"


@pytest.mark.parametrize("gs2", ["y,,", f"n,a={USER},"])
def test_gs2_headers_without_channel_binding_are_accepted(gs2: str) -> None:
    server = ScramServer("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", USER, SECRET)
    server.receive_client_first(client.first(gs2))
    server_first = server.server_first(credential())
    assert client.server_verified(server.receive_client_final(client.final(server_first)))


def test_the_server_nonce_is_random() -> None:
    firsts = set()
    for _ in range(2):
        server = ScramServer("SCRAM-SHA-256")
        server.receive_client_first(ScramClient("SCRAM-SHA-256", USER, SECRET).first())
        firsts.add(server.server_first(credential()))
    assert len(firsts) == 2


def test_usernames_are_unescaped() -> None:
    assert unescape_saslname("a=2Cb=3Dc") == "a,b=c"
    assert unescape_saslname("=3D2C") == "=2C"
    server = ScramServer("SCRAM-SHA-256")
    assert server.receive_client_first(b"n,a=a=2Cb,n=a=2Cb,r=abc") == "a,b"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"", "malformed_client_first"),
        (b"n,,n=KEY,r=", "malformed_client_first"),
        (b"n,,r=abc,n=KEY", "malformed_client_first"),
        (b"x,,n=KEY,r=abc", "malformed_client_first"),
        (b"n,,n=KE=59Y,r=abc", "malformed_client_first"),
        (b"n,,n=KEY,r=a,bc", "malformed_client_first"),
        (b"p=tls-unique,,n=KEY,r=abc", "channel_binding_requested"),
        (b"n,a=OTHER,n=KEY,r=abc", "authzid_differs"),
        (b"n,,m=future,n=KEY,r=abc", "reserved_mext"),
        (b"n,,n=KEY,r=abc,tokenauth=true", "extensions_unsupported"),
        ("n,,n=KÉY,r=abc".encode(), "not_ascii"),
        (b"n,,n=KEY,r=" + b"a" * 4096, "message_too_long"),
    ],
)
def test_bad_client_first_messages_are_refused(message: bytes, reason: str) -> None:
    server = ScramServer("SCRAM-SHA-256")
    with pytest.raises(ScramError) as refused:
        server.receive_client_first(message)
    assert refused.value.reason == reason
    assert server.state is ScramState.FAILED


def final_with(client: ScramClient, server_first: bytes, case: str) -> bytes:
    if case == "nonce_mismatch":
        return client.final(server_first, nonce=client.nonce)  # the client's half only
    if case == "channel_binding_mismatch":
        return client.final(server_first, channel=b64("y,,"))
    if case == "malformed_channel_binding":
        return client.final(server_first, channel="bml")
    if case == "wrong_proof":
        return client.final(server_first, secret=SECRET + "x")
    if case == "short_proof":
        return client.final(server_first).rsplit(b",p=", 1)[0] + b",p=" + b64(b"abc").encode()
    return client.final(server_first).rsplit(b",p=", 1)[0]  # no proof at all


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("nonce_mismatch", "nonce_mismatch"),
        ("channel_binding_mismatch", "channel_binding_mismatch"),
        ("malformed_channel_binding", "malformed_channel_binding"),
        ("wrong_proof", "wrong_proof"),
        ("short_proof", "wrong_proof"),
        ("no_proof", "malformed_client_final"),
    ],
)
def test_bad_client_final_messages_are_refused(case: str, reason: str) -> None:
    server, client, server_first = started()
    with pytest.raises(ScramError) as refused:
        server.receive_client_final(final_with(client, server_first, case))
    assert refused.value.reason == reason
    assert server.state is ScramState.FAILED


def test_without_a_credential_a_decoy_runs_to_the_proof() -> None:
    server = ScramServer("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", USER, SECRET)
    server.receive_client_first(client.first())
    decoy = server.server_first(None)
    assert b",s=" in decoy and decoy.endswith(b",i=8192")
    with pytest.raises(ScramError) as refused:
        server.receive_client_final(client.final(decoy))
    assert refused.value.reason == "no_credential"
    again = ScramServer("SCRAM-SHA-256")
    again.receive_client_first(client.first())
    assert again.server_first(None).split(b",")[1] == decoy.split(b",")[1]  # the same salt


def test_weak_or_mismatched_credentials_are_refused() -> None:
    server = ScramServer("SCRAM-SHA-256")
    server.receive_client_first(b"n,,n=KEY,r=abc")
    with pytest.raises(ScramError, match="iterations_below_minimum"):
        server.server_first(credential(iterations=1000))
    server = ScramServer("SCRAM-SHA-256")
    server.receive_client_first(b"n,,n=KEY,r=abc")
    with pytest.raises(ScramError, match="mechanism_mismatch"):
        server.server_first(credential("SCRAM-SHA-512"))


def test_messages_out_of_order_and_after_failure_are_refused() -> None:
    server = ScramServer("SCRAM-SHA-256")
    with pytest.raises(ScramError, match="unexpected_message"):
        server.receive_client_final(b"c=biws,r=abc,p=AAAA")
    with pytest.raises(ScramError, match="unexpected_message"):
        server.receive_client_first(b"n,,n=KEY,r=abc")  # a failed exchange stays failed
    done, client, server_first = started()
    done.receive_client_final(client.final(server_first))
    with pytest.raises(ScramError, match="unexpected_message"):
        done.receive_client_final(client.final(server_first))


def test_only_scram_mechanisms() -> None:
    with pytest.raises(ValueError):
        ScramServer("PLAIN")
