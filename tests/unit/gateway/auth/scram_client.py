"""A minimal SCRAM client for tests: builds client-first/final messages with
`tenancy.scram.client_proof` and checks the server signature. Pure; not thread-safe."""

from __future__ import annotations

import base64

from tenancy.scram import client_proof, make_credential, server_signature


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def escape(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    def __init__(
        self, mechanism: str, user: str, secret: str, *, nonce: str = "fyko+d2lbbFgONRv9qkxdawL"
    ) -> None:
        self.mechanism, self.user, self.secret, self.nonce = mechanism, user, secret, nonce
        self.gs2 = "n,,"
        self.bare = ""
        self.auth_message = b""
        self.expected_signature = b""

    def first(self, gs2: str = "n,,") -> bytes:
        self.gs2 = gs2
        self.bare = f"n={escape(self.user)},r={self.nonce}"
        return (gs2 + self.bare).encode()

    def final(
        self,
        server_first: bytes,
        *,
        nonce: str | None = None,
        channel: str | None = None,
        secret: str | None = None,
    ) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        without_proof = f"c={channel or b64(self.gs2)},r={nonce or fields['r']}"
        self.auth_message = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        proof = client_proof(
            self.mechanism, secret or self.secret, salt, iterations, self.auth_message
        )
        credential = make_credential(self.mechanism, self.secret, iterations=iterations, salt=salt)
        self.expected_signature = server_signature(credential, self.auth_message)
        return f"{without_proof},p={b64(proof)}".encode()

    def server_verified(self, server_final: bytes) -> bool:
        return server_final == b"v=" + b64(self.expected_signature).encode()
