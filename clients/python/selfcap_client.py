"""Self Capsule from Python: a minimal client.

Ed25519 from `cryptography`, RFC 8785 from `rfc8785`, RFC 9421 (signed reads of
private capsules) from `http-message-signatures`, HTTP from the standard library.
Signing is exactly docs/PROTOCOL.md §2 and §12; the unit tests check it byte for
byte against tests/vectors/signing.json, and signed reads against an RFC 9421
check of their own that tests/vectors/signed_reads.json validates.
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


# Signed reads of private capsules (docs/PROTOCOL.md §12): RFC 9421 HTTP Message
# Signatures from `http-message-signatures`, Ed25519 with the agent's own key.
import datetime  # noqa: E402
import secrets  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from http_message_signatures import HTTPMessageSigner, MappingKeyResolver, algorithms  # noqa: E402


def signed_read_headers(key: Ed25519PrivateKey, method: str, url: str) -> dict:
    """The headers that let this agent read a private capsule it may read (its own, or
    one whose owner granted it): a fresh signature over the method and the full URL,
    exactly as sent. Sign every request anew: each nonce is accepted once."""
    aid = agent_id(key)
    message = SimpleNamespace(method=method, url=url, headers={})
    signer = HTTPMessageSigner(
        signature_algorithm=algorithms.ED25519,
        key_resolver=MappingKeyResolver(public_keys={}, private_keys={aid: key}),
    )
    signer.sign(
        message,
        key_id=aid,  # keyid = the reader's agent id
        created=datetime.datetime.now(datetime.timezone.utc),
        nonce=secrets.token_urlsafe(16),
        label="sig1",
        covered_component_ids=("@method", "@target-uri"),
    )
    return {"Self-Public-Key": public_key_hex(key), **message.headers}


# HTTP: the standard library only.
import json  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402


class SelfCapsule:
    """head / get / put for one agent. Every call returns (status, body, headers).
    head and get read another agent with agent=..., and sign the read with signed=True
    (needed for a private capsule: unsigned, it answers 404 like a missing one)."""

    def __init__(self, base_url: str, key: Ed25519PrivateKey, timeout: float = 30):
        self.base = base_url.rstrip("/")
        self.key = key
        self.agent_id = agent_id(key)
        self.timeout = timeout

    def _call(self, method, path, body=None, headers=None, signed=False):
        headers = dict(headers or {})
        if signed:
            headers.update(signed_read_headers(self.key, method, self.base + path))
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

    def head(self, etag: str | None = None, agent: str | None = None, signed: bool = False):
        """GET head.json; pass the last ETag to get a bodiless 304 when nothing changed."""
        headers = {"if-none-match": etag} if etag else {}
        path = f"/self/{agent or self.agent_id}/head.json"
        return self._call("GET", path, headers=headers, signed=signed)

    def get(self, agent: str | None = None, signed: bool = False):
        return self._call("GET", f"/self/{agent or self.agent_id}/capsule.json", signed=signed)

    def put(self, capsule: dict, seq: int):
        """Sign and publish. On a rejection, body["reason_codes"] says why (never retry 4xx
        except 429 after body["retry_after_sec"])."""
        envelope = sign_envelope(self.key, seq, capsule)
        return self._call("PUT", f"/self/{self.agent_id}/capsule.json", envelope)
