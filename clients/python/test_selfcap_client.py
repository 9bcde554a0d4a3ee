"""The Python snippet reproduces tests/vectors/signing.json byte for byte."""

import json
import pathlib
import unittest

import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

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


if __name__ == "__main__":
    unittest.main()
