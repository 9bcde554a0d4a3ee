"""The bot flow from Python, against a running service:

    python3 example.py http://127.0.0.1:8787

new key -> head (404) -> put seq 1 -> head (ETag) -> head again (304). Prints a
JSON summary; exits non-zero if any step surprises it.
"""

import json
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from selfcap_client import SelfCapsule, cursor


def main(base_url: str) -> int:
    key = Ed25519PrivateKey.generate()  # keep key.private_bytes_raw() secret, e.g. mode 0600
    svc = SelfCapsule(base_url, key)
    capsule = {
        "schema_version": "self_capsule_v0",
        "agent_id": svc.agent_id,
        "policy": {
            "policy_version": "v0",
            "rehydrate_mode": "strict",
            "deny_external_instructions": True,
            "deny_tool_instructions_in_text": True,
            "memory_budget": {"max_rehydrate_tokens": 900, "max_objectives": 8},
        },
        "objectives": [
            {"id": "py-demo", "status": "in_progress", "title": "Publish from Python"}
        ],
    }

    status, _, _ = svc.head()
    assert status == 404, f"fresh agent: expected 404, got {status}"

    seq = 1  # = last accepted seq (head.json "seq") + 1
    status, body, _ = svc.put(capsule, seq)
    if status != 200:
        print(json.dumps(body), file=sys.stderr)  # body["reason_codes"] says why
        return 1
    assert body["cursor"] == cursor(capsule), "the service hashes what we hashed"

    status, head, headers = svc.head()
    etag = headers["etag"]
    assert status == 200 and head["seq"] == seq and head["cursor"] == cursor(capsule)

    status, _, _ = svc.head(etag)  # poll: nothing changed
    assert status == 304, f"expected 304, got {status}"

    print(json.dumps({"agent_id": svc.agent_id, "seq": seq, "cursor": head["cursor"], "poll": status}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
