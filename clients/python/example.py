"""The bot flow from Python, against a running service:

    python3 example.py http://127.0.0.1:8787
    python3 example.py http://127.0.0.1:8787 private

new key -> head (404) -> put seq 1 -> head (ETag) -> head again (304). With
`private`: a private capsule (access_control.public false, one granted reader) ->
anonymous GET (404) -> the owner's signed GET -> the reader's signed GET. Prints a
JSON summary; exits non-zero if any step surprises it.
"""

import json
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from selfcap_client import SelfCapsule, cursor


def example_capsule(agent: str) -> dict:
    return {
        "schema_version": "self_capsule_v0",
        "agent_id": agent,
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


def main(base_url: str) -> int:
    key = Ed25519PrivateKey.generate()  # keep key.private_bytes_raw() secret, e.g. mode 0600
    svc = SelfCapsule(base_url, key)
    capsule = example_capsule(svc.agent_id)

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


def private(base_url: str) -> int:
    """A private capsule: only its owner and the readers it grants can read it, with a
    signed read (docs/PROTOCOL.md §12); anyone else gets 404, as if it did not exist."""
    owner = SelfCapsule(base_url, Ed25519PrivateKey.generate())
    reader = SelfCapsule(base_url, Ed25519PrivateKey.generate())
    capsule = example_capsule(owner.agent_id)
    capsule["access_control"] = {
        "public": False,
        "authorized_readers": [{"agent_id": reader.agent_id, "scopes": ["READ_CAPSULE"]}],
    }
    status, body, _ = owner.put(capsule, 1)
    if status != 200:
        print(json.dumps(body), file=sys.stderr)
        return 1

    anonymous, _, _ = owner.get()  # unsigned: 404, like an agent that never published
    assert anonymous == 404, f"anonymous read of a private capsule: expected 404, got {anonymous}"
    status, mine, _ = owner.get(signed=True)
    assert status == 200 and cursor(mine) == cursor(capsule), f"owner's signed read: {status}"
    status, theirs, _ = reader.get(agent=owner.agent_id, signed=True)  # granted READ_CAPSULE
    assert status == 200 and theirs == mine, f"reader's signed read: {status}"
    head, _, _ = reader.head(agent=owner.agent_id, signed=True)  # not granted READ_HEAD
    assert head == 404, f"reader's head.json without READ_HEAD: expected 404, got {head}"

    print(json.dumps({"agent_id": owner.agent_id, "cursor": cursor(mine), "anonymous": anonymous,
                      "owner": 200, "reader": status, "reader_head": head}))
    return 0


if __name__ == "__main__":
    sys.exit(private(sys.argv[1]) if sys.argv[2:] == ["private"] else main(sys.argv[1]))
