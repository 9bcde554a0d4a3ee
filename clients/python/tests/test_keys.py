"""Key rotation through `selfcap.Client` against the real service (the Worker
in workerd, started by tests/e2e/python_package.test.mjs): the first publish
carries the inception, `rotate` (routine and compromised), `keys` with the
pin, a stale copy of the identity refused with `key_rotated`, `recommit`
pending, `keys_init` and the operator's `recover`, and a rolled-back or forked
log raised as `KeyLogConflictError`. Every rule is the client library's; these
only check that the package exposes it."""

import asyncio
import copy
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

import selfcap
from conftest import vector


@pytest.fixture(scope="module")
def url():
    u = os.environ.get("SELFCAP_TEST_URL")
    assert u, "SELFCAP_TEST_URL is not set: run this through tests/e2e/python_package.test.mjs"
    return u.rstrip("/")


def capsule_for(agent_id, motto):
    case = next(c for c in vector("capsules.json")["cases"] if c["name"] == "minimal")
    capsule = copy.deepcopy(case["capsule"])
    capsule["agent_id"] = agent_id
    capsule["self_motto"] = motto
    return capsule


def secret(identity, name):
    return (Path(identity.state_dir) / name).read_text().strip()


def test_publish_rotate_publish_keys_stale_copy_recommit_and_a_compromised_rotation(url, home, tmp_path):
    me = selfcap.Identity.create(home=home)
    assert me.key_index == 0
    agent, genesis = me.agent_id, me.public_key
    state = Path(me.state_dir)
    assert ((state / "next.key").stat().st_mode & 0o777) == 0o600
    first_next = secret(me, "next.key")
    assert first_next != secret(me, "key")
    svc = selfcap.Client(url, identity=me)

    # The first write carries the inception: head.json has a key log.
    first = svc.publish(capsule_for(me.agent_id, "First, by the genesis key."))
    assert (first.seq, first.sent) == (1, True)
    head = svc.head()
    assert head.keys is not None
    assert (head.keys["length"], head.keys["index"], head.keys["public_key"]) == (1, 0, genesis)
    assert head.keys["next_committed"] is True

    log = svc.keys()
    assert log.valid and log.length == 1 and log.index == 0
    assert log.pin["status"] == "new"
    assert [e["type"] for e in log.events] == ["inception"]
    assert json.loads((state / "key_pins.json").read_text())[me.agent_id]["length"] == 1
    # The same view as `selfcap keys --json`, and from another reader.
    assert selfcap.Client(url).keys(me.agent_id).events == log.events

    # A copy of the directory taken now keeps the genesis key.
    stale_home = tmp_path / "stale"
    shutil.copytree(state, stale_home / me.agent_id)

    before = svc.head()
    r = svc.rotate()
    assert isinstance(r, selfcap.Rotated)
    assert (r.kind, r.applied, r.index, r.resumed) == ("rotation", "new", 1, False)
    assert r.public_key != genesis and r.keys["index"] == 1
    # The identity given to the client follows; the agent id never changes.
    assert (me.agent_id, me.public_key, me.key_index) == (agent, r.public_key, 1)
    again = selfcap.Identity.load(home=home)
    assert (again.agent_id, again.public_key, again.key_index) == (me.agent_id, r.public_key, 1)
    assert secret(me, "key") == first_next, "next.key became the key"
    assert secret(me, "next.key") != first_next, "a fresh next key was committed"
    for name in ("rotation.json", "next.key.new"):
        assert not (state / name).exists()

    # The key event changed the head and its ETag, not its cursor.
    after = svc.head(etag=before.etag)
    assert after is not None and after.cursor == before.cursor
    assert (after.keys["index"], after.keys["length"]) == (1, 2) and after.etag != before.etag
    assert svc.head(etag=after.etag) is None

    # Publishing again works, signed by the new key.
    second = svc.publish(capsule_for(me.agent_id, "Second, by the rotated key."))
    assert (second.seq, second.sent) == (2, True)
    head = svc.head()
    assert (head.seq, head.keys["index"], head.keys["public_key"]) == (2, 1, r.public_key)

    log = svc.keys()
    assert log.valid and log.index == 1 and log.length == 2
    assert log.pin["status"] == "consistent"
    assert [f"{e['type']}/{e['authority']}" for e in log.events] == ["inception/genesis", "rotation/next"]
    text = json.dumps(log.raw)
    for key in (secret(me, "key"), secret(me, "next.key")):
        assert key not in text, "no key material in the view"
    assert asyncio.run(selfcap.AsyncClient(url, identity=me).keys()).index == 1

    # The stale copy signs with the rotated-out key: key_rotated.
    stale = selfcap.Identity.load(home=stale_home)
    assert (stale.agent_id, stale.key_index, stale.public_key) == (me.agent_id, 0, genesis)
    with pytest.raises(selfcap.Rejected) as caught:
        selfcap.Client(url, identity=stale).publish(capsule_for(me.agent_id, "From the old key."))
    assert caught.value.reason_codes == ["key_rotated"]
    assert (caught.value.status, caught.value.exit_code, caught.value.local) == (403, 6, False)
    assert caught.value.what_to_do
    assert svc.head().seq == 2, "nothing was stored"

    assert svc.verify().valid

    # A recommit is pending until the recovery window has passed.
    rc = svc.recommit()
    assert (rc.kind, rc.applied, rc.index) == ("recommit", "new", 2)
    pending = rc.keys["pending_recommit"]
    assert pending and pending["matures_at"]
    assert rc.public_key == me.public_key and me.key_index == 1, "a recommit keeps the current key"
    assert (state / "next.key.recommit").is_file()
    assert svc.keys().keys["pending_recommit"] == pending
    assert svc.head().keys["pending_recommit"]["matures_at"] == pending["matures_at"]
    with pytest.raises(selfcap.LocalError, match="recommit_pending"):
        svc.recommit()

    # The current key was stolen: dispute its writes after seq 2 and
    # re-publish the desired capsule above it with the next key (which also
    # cancels the pending recommit).
    with pytest.raises(ValueError):
        svc.rotate(compromised=True)
    with pytest.raises(ValueError):
        svc.rotate(last_good=2)
    cr = svc.rotate(compromised=True, last_good=2)
    assert (cr.kind, cr.index, cr.keys["index"]) == ("rotation", 3, 2)
    assert cr.keys["pending_recommit"] is None
    assert cr.write is not None and cr.write["seq"] == 3
    assert me.key_index == 2 and me.public_key == cr.public_key
    assert not (state / "next.key.recommit").exists()
    assert svc.head().seq == 3


def test_a_rolled_back_or_forked_log_is_a_key_log_conflict_and_an_interrupted_rotation_resumes(url, home, monkeypatch):
    me = selfcap.Identity.create(home=home)
    svc = selfcap.Client(url, identity=me)
    svc.publish(capsule_for(me.agent_id, "Pinned once."))
    assert svc.keys().pin["status"] == "new"
    pins_file = Path(me.state_dir) / "key_pins.json"
    pinned = json.loads(pins_file.read_text())
    good = dict(pinned[me.agent_id])

    # A pin longer than the served log: a rollback.
    pinned[me.agent_id] = {**good, "length": good["length"] + 2}
    pins_file.write_text(json.dumps(pinned))
    with pytest.raises(selfcap.KeyLogConflictError) as caught:
        svc.keys()
    e = caught.value
    assert e.exit_code == 10
    assert e.pin == {"status": "rollback", "pinned": good["length"] + 2, "served": good["length"]}
    assert e.key_log["agent_id"] == me.agent_id and e.key_log["valid"] is True
    assert "ROLLBACK" in str(e)
    # The pin is kept, and the key commands refuse to build on such a log.
    assert json.loads(pins_file.read_text())[me.agent_id]["length"] == good["length"] + 2
    with pytest.raises(selfcap.KeyLogConflictError) as refused:
        svc.rotate()
    assert refused.value.exit_code == 10 and refused.value.key_log is None
    assert me.key_index == 0

    # Another record at the pinned position: a fork.
    pinned[me.agent_id] = {**good, "head_hash": "0" * 64}
    pins_file.write_text(json.dumps(pinned))
    with pytest.raises(selfcap.KeyLogConflictError) as caught:
        svc.keys()
    assert caught.value.pin["status"] == "fork" and caught.value.pin["index"] == good["length"] - 1
    assert not isinstance(caught.value, selfcap.Rejected)

    pinned[me.agent_id] = good
    pins_file.write_text(json.dumps(pinned))
    assert svc.keys().pin["status"] == "consistent"

    # A crash right after the service accepted the rotation (the client
    # library's test hook): nothing swapped here, the signed request kept.
    state = Path(me.state_dir)
    monkeypatch.setenv("SELFCAP_TEST_STOP", "after-submit")
    with pytest.raises(selfcap.UnavailableError) as stopped:
        svc.rotate()
    assert stopped.value.exit_code == 3
    assert (state / "rotation.json").is_file() and (state / "next.key.new").is_file()
    assert selfcap.Identity.load(home=home).key_index == 0 and me.key_index == 0
    assert svc.head().keys["index"] == 1, "the service has the rotation"
    monkeypatch.delenv("SELFCAP_TEST_STOP")
    # The next call resends the same bytes and finishes the swap.
    r = svc.rotate()
    assert (r.kind, r.applied, r.index, r.resumed) == ("rotation", "already_applied", 1, True)
    assert (me.key_index, me.public_key) == (1, r.public_key)
    assert not (state / "rotation.json").exists()
    assert svc.publish(capsule_for(me.agent_id, "After the resumed rotation.")).seq == 2


def test_keys_init_for_an_identity_without_a_log_then_the_operators_recovery(url, home):
    me = selfcap.Identity.create(home=home / "me")
    operator = selfcap.Identity.create(home=home / "operator")  # never publishes: only its key file is used
    state = Path(me.state_dir)
    # As an identity made before key logs: no next key, none committed.
    (state / "next.key").unlink()
    identity_file = state / "identity.json"
    ident = json.loads(identity_file.read_text())
    del ident["next_key_digest"]
    identity_file.write_text(json.dumps(ident))
    svc = selfcap.Client(url, identity=me)

    svc.publish(capsule_for(me.agent_id, "Before the key log."))
    assert svc.head().keys is None
    log = svc.keys()
    assert log.valid and (log.length, log.keys, log.index, log.events) == (0, None, 0, [])
    with pytest.raises(selfcap.LocalError, match="no key log"):
        svc.rotate()

    digest = hashlib.sha256(bytes.fromhex(operator.public_key)).hexdigest()
    with pytest.raises(ValueError):
        svc.keys_init(recovery_digest="not hex")
    started = svc.keys_init(recovery_digest=digest)
    assert (started["applied"], started["index"]) == ("new", 0)
    assert started["keys"]["recovery_committed"] is True
    assert ((state / "next.key").stat().st_mode & 0o777) == 0o600
    assert svc.head().keys["length"] == 1
    with pytest.raises(selfcap.LocalError, match="already has a key log"):
        svc.keys_init()

    genesis = me.public_key
    rec = svc.recover(Path(operator.state_dir) / "key")
    assert (rec.kind, rec.applied, rec.index) == ("recovery", "new", 1)
    assert rec.public_key not in (genesis, operator.public_key)
    assert rec.keys["recovery_committed"] is False, "the revealed recovery key is spent"
    assert (me.key_index, me.public_key) == (1, rec.public_key)
    assert svc.publish(capsule_for(me.agent_id, "After the recovery.")).seq == 2
    assert [e["authority"] for e in svc.keys().events] == ["genesis", "recovery"]

    # The spent recovery key no longer speaks for the agent.
    with pytest.raises(selfcap.Rejected) as caught:
        svc.recover(Path(operator.state_dir) / "key")
    assert caught.value.reason_codes == ["rotation_not_committed"]
    assert not (state / "rotation.json").exists()
    assert me.key_index == 1
