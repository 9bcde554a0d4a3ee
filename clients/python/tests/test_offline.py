"""The offline API against the conformance vectors: canonical bytes, cursors,
the service's capsule checks (reason codes, status, findings), the offline
verifier on tampered histories, and identities shared with the CLI."""

import copy
import hashlib
import json
import math
import subprocess

import pytest

import selfcap
from conftest import VECTORS, place_vector_key, selfcap_command, vector


# --- canonical JSON (RFC 8785) ------------------------------------------------


def test_signing_vector_bytes_and_cursor():
    v = vector("signing.json")
    assert selfcap.canonicalize(v["capsule"]) == v["capsule_jcs"].encode()
    message = {"agent_id": v["agent_id"], "seq": v["seq"], "capsule": v["capsule"]}
    assert selfcap.canonicalize(message) == v["message_jcs"].encode()
    assert hashlib.sha256(selfcap.canonicalize(message)).hexdigest() == v["digest_hex"]
    assert selfcap.cursor(v["capsule"]) == v["cursor"]
    assert v["capsule_bytes"] == len(selfcap.canonicalize(v["capsule"]))


def test_rfc8785_numbers_from_python_floats_and_ints():
    # RFC 8785 section 3.2.2.3's example, written as Python values.
    numbers = [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001]
    assert selfcap.canonicalize({"numbers": numbers}) == b'{"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27]}'
    # Integral floats are integers; -0 is 0; 2**53 stays exact; 1e21 switches to exponent form.
    assert selfcap.canonicalize([1.0, -0.0, 2**53, 1e21, 1e20, 0.1]) == b"[1,0,9007199254740992,1e+21,100000000000000000000,0.1]"


def test_rfc8785_key_order_is_by_utf16_code_units():
    # RFC 8785 section 3.2.3's example.
    obj = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    keys = list(json.loads(selfcap.canonicalize(obj)))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_values_json_cannot_carry_are_refused():
    with pytest.raises(ValueError):
        selfcap.canonicalize({"x": math.nan})
    with pytest.raises(ValueError):
        selfcap.cursor([math.inf])


# --- the service's capsule checks ------------------------------------------------


CASES = vector("capsules.json")["cases"]


def _reason_table():
    """docs/PROTOCOL.md's reason-code table: code -> HTTP status, bot action."""
    table = {}
    text = (VECTORS.parents[1] / "docs" / "PROTOCOL.md").read_text(encoding="utf-8")
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[1].isdigit():
            table[cells[0].strip("`")] = {"status": int(cells[1]), "action": cells[3]}
    assert len(table) > 40, "the reason-code table was not found"
    return table


REASONS = _reason_table()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_check_matches_the_capsule_vectors(case):
    if case["valid"]:
        assert selfcap.check(case["capsule"]) is None
        return
    with pytest.raises(selfcap.Rejected) as caught:
        selfcap.check(case["capsule"])
    e = caught.value
    assert e.reason_codes == case["reason_codes"]
    assert e.local is True
    assert e.what_to_do, "every rejection says what to do"
    assert e.exit_code == 4  # fix_payload, as `selfcap put` exits
    # The status and the advice are the protocol's reason-code table's.
    assert e.status == REASONS[e.reason_codes[0]]["status"]
    assert e.what_to_do == list(dict.fromkeys(REASONS[c]["action"] for c in e.reason_codes))
    if e.reason_codes == ["unsafe_content"]:
        assert e.findings and all({"class", "rule", "path"} <= set(f) for f in e.findings)


def _case(name):
    return copy.deepcopy(next(c for c in CASES if c["name"] == name)["capsule"])


def test_size_limit_follows_the_tier():
    big = _case("capsule_too_large_for_free")
    with pytest.raises(selfcap.Rejected) as caught:
        selfcap.check(big, tier="free")
    assert caught.value.reason_codes == ["capsule_too_large"]
    assert caught.value.max_bytes == 4096
    assert caught.value.observed_bytes == len(selfcap.canonicalize(big))
    assert selfcap.check(big, tier="pro") is None
    with pytest.raises(ValueError):
        selfcap.check(big, tier="gold")


def test_unsafe_text_is_named_by_path_never_echoed():
    capsule = _case("unsafe_injection_in_title")
    with pytest.raises(selfcap.Rejected) as caught:
        selfcap.check(capsule)
    e = caught.value
    title = capsule["objectives"][0]["title"]
    assert title not in json.dumps(e.body)
    assert any(f["path"].startswith("$.objectives[0]") for f in e.findings)
    assert isinstance(e, selfcap.SelfcapError)


# --- offline verification ----------------------------------------------------------


HISTORY = sorted((vector("history/" + p.name) for p in (VECTORS / "history").glob("*.json")), key=lambda h: h["name"])


@pytest.mark.parametrize("case", HISTORY, ids=[h["name"] for h in HISTORY])
def test_verify_export_matches_the_history_vectors(case):
    report = selfcap.verify_export(case["bundle"], keyring=case["trusted_keys"])
    assert report.valid is case["expect"]["valid"]
    assert bool(report) is case["expect"]["valid"]
    assert report.level == case["expect"]["level"]
    assert sorted(report.failing) == sorted(case["expect"].get("failing", []))


def test_verify_export_without_a_keyring_trusts_the_bundle_and_says_so():
    valid = next(h for h in HISTORY if h["name"] == "valid")
    report = selfcap.verify_export(valid["bundle"])
    assert report.valid
    assert report.warnings


def test_a_byte_changed_in_an_export_fails_verification():
    valid = next(h for h in HISTORY if h["name"] == "valid")
    text = json.dumps(valid["bundle"])
    assert "verifiable history" in text
    tampered = json.loads(text.replace("verifiable history", "verifiable histary", 1))
    report = selfcap.verify_export(tampered, keyring=valid["trusted_keys"])
    assert not report.valid
    assert "chain" in report.failing


# --- identities ---------------------------------------------------------------------


def test_identity_create_then_load_in_the_clis_directory(home):
    me = selfcap.Identity.create(home=home)
    assert me.agent_id == hashlib.sha256(bytes.fromhex(me.public_key)).hexdigest()
    key = home / me.agent_id / "key"
    assert key.is_file() and (key.stat().st_mode & 0o777) == 0o600
    assert selfcap.Identity.load(home=home) == me
    # The selfcap command finds the same identity.
    out = subprocess.run(
        [selfcap_command(), "--home", str(home), "id", "--json"], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout)["agent_id"] == me.agent_id


def test_identity_load_reads_an_existing_key(home):
    v = vector("signing.json")
    place_vector_key(home)
    me = selfcap.Identity.load(home=str(home))
    assert (me.agent_id, me.public_key) == (v["agent_id"], v["public_key"])


def test_identity_load_errors_carry_the_clis_exit_code(home, monkeypatch):
    with pytest.raises(selfcap.LocalError) as caught:
        selfcap.Identity.load(home=home)
    assert caught.value.exit_code == 1
    assert "no identity" in str(caught.value)
    a = selfcap.Identity.create(home=home)
    b = selfcap.Identity.create(home=home)
    with pytest.raises(selfcap.LocalError):
        selfcap.Identity.load(home=home)
    assert selfcap.Identity.load(home=home, agent=b.agent_id[:12]) == b
    monkeypatch.setenv("SELFCAP_HOME", str(home))
    assert selfcap.Identity.load(agent=a.agent_id) == a


def test_a_new_identity_has_a_next_key_and_key_index_0(home):
    me = selfcap.Identity.create(home=home)
    assert me.key_index == 0
    nxt = home / me.agent_id / "next.key"
    assert nxt.is_file() and (nxt.stat().st_mode & 0o777) == 0o600
    assert nxt.read_text() != (home / me.agent_id / "key").read_text()
    assert selfcap.Identity.load(home=home).key_index == 0
    assert me.refresh() is me and (me.public_key, me.key_index) == (
        selfcap.Identity.load(home=home).public_key,
        0,
    )
    out = subprocess.run(
        [selfcap_command(), "--home", str(home), "id", "--json"], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout)["public_key"] == me.public_key


def test_key_command_arguments_are_checked_before_anything_is_sent(home):
    me = selfcap.Identity.create(home=home)
    # Nothing listens there: a check that passed would fail as unavailable.
    svc = selfcap.Client("http://127.0.0.1:9", identity=me, timeout=1, retries=0)
    with pytest.raises(ValueError, match="go together"):
        svc.rotate(compromised=True)
    with pytest.raises(ValueError, match="go together"):
        svc.rotate(last_good=3)
    for call in (svc.keys_init, svc.recommit, lambda recovery_digest: svc.rotate(recovery_digest=recovery_digest)):
        with pytest.raises(ValueError, match="recovery_digest"):
            call(recovery_digest="AB" * 32)
    with pytest.raises(ValueError, match="not an agent id"):
        svc.keys("nope")
    with pytest.raises(selfcap.UnavailableError):
        svc.keys()
