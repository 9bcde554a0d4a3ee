"""Self Capsule from Python: a minimal client.

Ed25519 from `cryptography`, RFC 8785 from `rfc8785`, HTTP from the standard
library. Signing is exactly docs/PROTOCOL.md §2; the unit tests check it
byte for byte against tests/vectors/signing.json.
"""

import hashlib

import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def public_key_hex(key: Ed25519PrivateKey) -> str:
    """The raw 32-byte public key, lowercase hex (the envelope's public_key)."""
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def agent_id(key: Ed25519PrivateKey) -> str:
    """agent_id = lowercase hex SHA-256 of the raw public key bytes."""
    return hashlib.sha256(bytes.fromhex(public_key_hex(key))).hexdigest()


def cursor(capsule: dict) -> str:
    """"sha256:" + hex SHA-256 of the capsule's RFC 8785 bytes."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps(capsule)).hexdigest()


def write_digest(agent: str, seq: int, capsule: dict) -> bytes:
    """The 32 bytes a write signs: SHA-256(JCS({agent_id, seq, capsule}))."""
    message = {"agent_id": agent, "seq": seq, "capsule": capsule}
    return hashlib.sha256(rfc8785.dumps(message)).digest()


def sign_envelope(key: Ed25519PrivateKey, seq: int, capsule: dict) -> dict:
    """The PUT body: Ed25519 over the 32 raw digest bytes (not their hex)."""
    aid = agent_id(key)
    signature = key.sign(write_digest(aid, seq, capsule))
    return {
        "agent_id": aid,
        "public_key": public_key_hex(key),
        "seq": seq,
        "signature_alg": "ed25519",
        "signature": signature.hex(),
        "capsule": capsule,
    }


# HTTP: the standard library only.
import json  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402


class SelfCapsule:
    """head / get / put for one agent. Every call returns (status, body, headers)."""

    def __init__(self, base_url: str, key: Ed25519PrivateKey, timeout: float = 30):
        self.base = base_url.rstrip("/")
        self.key = key
        self.agent_id = agent_id(key)
        self.timeout = timeout

    def _call(self, method, path, body=None, headers=None):
        req = urllib.request.Request(
            self.base + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"content-type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                status, raw, hdrs = r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:  # 304 and every 4xx/5xx land here
            status, raw, hdrs = e.code, e.read(), e.headers
        return status, (json.loads(raw) if raw else None), hdrs

    def head(self, etag: str | None = None):
        """GET head.json; pass the last ETag to get a bodiless 304 when nothing changed."""
        headers = {"if-none-match": etag} if etag else {}
        return self._call("GET", f"/self/{self.agent_id}/head.json", headers=headers)

    def get(self):
        return self._call("GET", f"/self/{self.agent_id}/capsule.json")

    def put(self, capsule: dict, seq: int):
        """Sign and publish. On a rejection, body["reason_codes"] says why (never retry 4xx
        except 429 after body["retry_after_sec"])."""
        envelope = sign_envelope(self.key, seq, capsule)
        return self._call("PUT", f"/self/{self.agent_id}/capsule.json", envelope)
