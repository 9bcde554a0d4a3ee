"""The Python snippet reproduces tests/vectors/signing.json byte for byte, and its signed
reads verify under an RFC 9421 check written here from the RFC (not the library), which
itself accepts and refuses tests/vectors/signed_reads.json (made with npm http-message-sig)
as they expect."""

import base64
import hashlib
import json
import pathlib
import re
import time
import unittest

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

import selfcap_client as sc

VECTORS = pathlib.Path(__file__).resolve().parents[2] / "tests" / "vectors"


class SigningVector(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.v = json.loads((VECTORS / "signing.json").read_text())
        cls.key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(cls.v["seed_hex"]))

    def test_identity(self):
        self.assertEqual(sc.public_key_hex(self.key), self.v["public_key"])
        self.assertEqual(sc.agent_id(self.key), self.v["agent_id"])

    def test_canonical_bytes_and_cursor(self):
        jcs = rfc8785.dumps(self.v["capsule"])
        self.assertEqual(jcs, self.v["capsule_jcs"].encode())
        self.assertEqual(len(jcs), self.v["capsule_bytes"])
        self.assertEqual(sc.cursor(self.v["capsule"]), self.v["cursor"])

    def test_message_digest_and_signature(self):
        message = {"agent_id": self.v["agent_id"], "seq": self.v["seq"], "capsule": self.v["capsule"]}
        self.assertEqual(rfc8785.dumps(message), self.v["message_jcs"].encode())
        digest = sc.write_digest(self.v["agent_id"], self.v["seq"], self.v["capsule"])
        self.assertEqual(digest.hex(), self.v["digest_hex"])
        envelope = sc.sign_envelope(self.key, self.v["seq"], self.v["capsule"])
        self.assertEqual(envelope["signature"], self.v["signature"])
        self.assertEqual(envelope, self.v["envelope"])
        self.assertEqual(rfc8785.dumps(envelope), rfc8785.dumps(self.v["envelope"]))



def verify_signed_read(method: str, url: str, headers: dict) -> dict:
    """docs/PROTOCOL.md §12 by hand: the signature base of RFC 9421 §2.5 over "@method"
    and "@target-uri", Ed25519 with Self-Public-Key, keyid = SHA-256(public key). Returns
    the parameters; raises on any mismatch."""
    h = {k.lower(): v for k, v in headers.items()}
    m = re.fullmatch(r'sig1=(\("@method" "@target-uri"\)((?:;[a-z]+=(?:"[^"]*"|\d+))*))', h["signature-input"])
    assert m, h["signature-input"]
    inner, params = m.group(1), dict(re.findall(r';([a-z]+)=(?:"([^"]*)"|\d+)', m.group(2)))
    params.update({k: int(v) for k, v in re.findall(r";([a-z]+)=(\d+)", m.group(2))})
    base = f'"@method": {method}\n"@target-uri": {url}\n"@signature-params": {inner}'
    sig = re.fullmatch(r"sig1=:([A-Za-z0-9+/=]+):", h["signature"])
    assert sig, h["signature"]
    public = bytes.fromhex(h["self-public-key"])
    assert hashlib.sha256(public).hexdigest() == params["keyid"], "keyid is not the key's agent id"
    Ed25519PublicKey.from_public_bytes(public).verify(base64.b64decode(sig.group(1)), base.encode())
    return params


class SignedReadVectors(unittest.TestCase):
    """The check above agrees with an independent signer (tests/vectors/signed_reads.json)."""

    def test_the_check_accepts_the_ok_vectors_and_refuses_wrong_targets(self):
        doc = json.loads((VECTORS / "signed_reads.json").read_text())
        checked = 0
        for v in doc["vectors"]:
            if not re.fullmatch(r'sig1=\("@method" "@target-uri"\).*', v["headers"]["signature-input"]):
                continue
            if v["expect"] == "ok":
                params = verify_signed_read(v["method"], v["target_uri"], v["headers"])
                self.assertEqual(params["nonce"], v["nonce"])
                checked += 1
            elif "another document" in v["name"] or "another method" in v["name"]:
                with self.assertRaises(InvalidSignature):
                    verify_signed_read(v["method"], v["target_uri"], v["headers"])
                checked += 1
        self.assertGreaterEqual(checked, 6)


class SignedRead(unittest.TestCase):
    URL = "https://self.example.com/self/" + "a" * 64 + "/history.json?since=sha256%3A00&limit=5"

    def test_the_snippets_signed_read_verifies(self):
        key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
        headers = sc.signed_read_headers(key, "GET", self.URL)
        self.assertEqual(headers["Self-Public-Key"], sc.public_key_hex(key))
        params = verify_signed_read("GET", self.URL, headers)
        self.assertEqual(params["keyid"], sc.agent_id(key))
        self.assertEqual(params["alg"], "ed25519")
        self.assertLessEqual(abs(params["created"] - time.time()), 5)
        self.assertTrue(8 <= len(params["nonce"]) <= 128)

    def test_it_is_bound_to_method_and_url_and_fresh_each_time(self):
        key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
        a = sc.signed_read_headers(key, "GET", self.URL)
        b = sc.signed_read_headers(key, "GET", self.URL)
        self.assertNotEqual(verify_signed_read("GET", self.URL, a)["nonce"], verify_signed_read("GET", self.URL, b)["nonce"])
        with self.assertRaises(InvalidSignature):
            verify_signed_read("GET", self.URL.replace("history", "export"), a)
        with self.assertRaises(InvalidSignature):
            verify_signed_read("HEAD", self.URL, a)


if __name__ == "__main__":
    unittest.main()
