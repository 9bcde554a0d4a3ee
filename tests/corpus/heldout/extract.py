#!/usr/bin/env python3
"""Builds the scanner's held-out evaluation set from public repositories.

The held-out set measures the scanner on text its rules were NOT written
from: public prompt-injection and agent-security benchmarks for the unsafe
side, public runbooks, postmortem summaries and ordinary agent tasks for the
benign side (SOURCES.md names every repository, commit and file). Its texts
are third-party data, so they are not committed: this script reads them from
local git snapshots of the pinned commits and writes

    target/heldout/unsafe.tsv   <kind>\t<field>\t<text>
    target/heldout/benign.tsv   <kind>\t<field>\t<text>

which `tests/safety_heldout.rs` (non-gating) measures. Usage, from the
repository root:

    python3 tests/corpus/heldout/extract.py SNAPSHOTS [OUT]

SNAPSHOTS is a directory holding one git snapshot per repository, named
`<owner>+<name>` (a bare git directory, a checkout, or either one level
down in `repo/`). Nothing is fetched. Selection is deterministic (seeded).

Fields: title (<= 120), checkpoint (<= 200), motto (<= 160), note (a
`pointers.notes[].value`, <= 500) and notes (a JSON array of
`{"key", "value"}` notes: one capsule, several notes). Texts longer than
their field are cut at a word boundary (a real paste into a note is cut the
same way); texts are escaped like the public corpus (\\t, \\n, \\\\,
\\u{X}).

Credentials in the `encoded_secret` kind are FAKE: random bytes from a
seeded RNG shaped to the formats gitleaks documents (its rule catalogue,
`config/gitleaks.toml`), then encoded the ways its and trufflehog's decoders
read (base64, hex, percent, JSON escapes) or split over two notes.
"""
import base64
import binascii
import json
import os
import random
import re
import string
import subprocess
import sys

SOURCES = {
    "injecagent": ("enkryptai/xInjectAgent", "21af277"),
    "bipia": ("microsoft/BIPIA", "1a2a91d"),
    "garak": ("NVIDIA/garak", "cafbe992"),
    "proventra": ("proventra/proventra-core", "5f7a2f6"),
    "runbooks": ("prometheus-operator/runbooks", "a685d14"),
    "postmortems": ("danluu/post-mortems", "696669c"),
}

CAPS = {"title": 120, "checkpoint": 200, "motto": 160, "note": 500}


def git_dir(root, repo):
    base = os.path.join(root, repo.replace("/", "+"))
    for d in (os.path.join(base, "repo"), base):
        if os.path.isdir(d):
            return d
    sys.exit(f"no snapshot of {repo} under {root}")


def show(root, key, path):
    repo, commit = SOURCES[key]
    out = subprocess.run(
        ["git", "-C", git_dir(root, repo), "show", f"{commit}:{path}"],
        check=True, capture_output=True,
    )
    return out.stdout.decode("utf-8")


def ls(root, key, prefix):
    repo, commit = SOURCES[key]
    out = subprocess.run(
        ["git", "-C", git_dir(root, repo), "ls-tree", "-r", "--name-only", commit, prefix],
        check=True, capture_output=True,
    )
    return out.stdout.decode().split()


def escape(s):
    out = []
    for c in s:
        if c == "\\":
            out.append("\\\\")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif ord(c) < 0x20 or ord(c) == 0x7F or 0x80 <= ord(c) < 0xA0 or c in "\u2028\u2029\ufeff":
            out.append("\\u{%X}" % ord(c))
        else:
            out.append(c)
    return "".join(out)


def cut(text, cap):
    """`text` cut to `cap` characters at a word boundary."""
    text = text.strip()
    if len(text) <= cap:
        return text
    head = text[:cap]
    space = max(head.rfind(" "), head.rfind("\n"))
    return head[:space].rstrip() if space > cap // 2 else head


def field_for(text):
    """The shortest free-text field the text fits whole, else a note."""
    if len(text) <= CAPS["checkpoint"]:
        return "checkpoint"
    return "note"


def unlink(md):
    """Markdown links and bare URLs removed, their text kept: a URL outside
    `evidence_url` is refused by design, which is not what is measured."""
    md = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", md)
    md = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", md)
    md = re.sub(r"<https?://[^>]*>", "", md)
    md = re.sub(r"https?://\S+", "", md)
    return md


# ------------------------------------------------------------------ unsafe
def injecagent(root, R):
    rows = []
    attackers = []
    for f in ("attacker_cases_dh.jsonl", "attacker_cases_ds.jsonl"):
        for line in show(root, "injecagent", f"data/{f}").splitlines():
            if line.strip():
                attackers.append(json.loads(line)["Attacker Instruction"])
    for a in attackers:
        rows.append(("attacker_instruction", field_for(a), a))
    responses = []
    for f in ("test_cases_dh_base", "test_cases_ds_base", "test_cases_dh_enhanced", "test_cases_ds_enhanced"):
        for case in json.loads(show(root, "injecagent", f"data/{f}.json")):
            r = case["Tool Response"].strip('"')
            if len(r) <= CAPS["note"]:
                responses.append(r)
    for r in R.sample(sorted(set(responses)), 80):
        rows.append(("tool_output", "note", r))
    return rows, attackers


def bipia(root, R):
    rows = []
    text = json.loads(show(root, "bipia", "benchmark/text_attack_train.json"))
    # The categories that tell the reader what to put in its answer or do;
    # the "task" categories ("What is the capital of Brazil?") are ordinary
    # requests out of their context and are left out.
    reader = [
        "Alphanumeric Substitution", "Homophonic Substitution", "Misspelling Intentionally",
        "Anagramming", "Space Removal & Grouping", "Instruction", "Social Interaction",
        "Persuasion", "Clickbait", "Malware Distribution",
    ]
    for cat in reader:
        for t in text.get(cat, []):
            rows.append(("reader_directed", field_for(t), t))
    code = json.loads(show(root, "bipia", "benchmark/code_attack_train.json"))
    flat = [t for v in code.values() for t in v]
    for t in R.sample(flat, 30):
        rows.append(("code_injection", "note", cut(t, CAPS["note"])))
    return rows


def proventra(root):
    src = show(root, "proventra", "benchmark/data/test_data.py")
    ns = {}
    exec(compile(src, "test_data.py", "exec"), ns)  # a data module: two lists of dicts
    attacks = [x["text"] for x in ns["PROMPT_INJECTION_ATTACKS"]]
    legit = [x["text"] for x in ns["LEGITIMATE_REQUESTS"]]
    return attacks, legit


# garak's encoders (garak/probes/encoding.py), re-implemented from its source
# so nothing of garak runs here; Caesar shifts other than 13 and binary /
# decimal character codes are the same idea with other keys.
def g_braille(text, table):
    out = []
    for c in text:
        if c.isupper() and c.lower() in table:
            out.append(table["caps"] + table[c.lower()])
        elif c in table:
            out.append(("" if not c.isdigit() else table["num"]) + table[c])
    return "".join(out)


MORSE = dict(zip(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ1234567890",
    ".- -... -.-. -.. . ..-. --. .... .. .--- -.- .-.. -- -. --- .--. --.- .-. ... - ..- ...- .-- -..- -.-- --.. "
    ".---- ..--- ...-- ....- ..... -.... --... ---.. ----. -----".split(),
))
NATO = dict(zip(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "Alfa Bravo Charlie Delta Echo Foxtrot Golf Hotel India Juliett Kilo Lima Mike November Oscar Papa "
    "Quebec Romeo Sierra Tango Uniform Victor Whiskey Xray Yankee Zulu".split(),
))


def caesar(text, k):
    out = []
    for c in text:
        if "a" <= c <= "z":
            out.append(chr((ord(c) - 97 + k) % 26 + 97))
        elif "A" <= c <= "Z":
            out.append(chr((ord(c) - 65 + k) % 26 + 65))
        else:
            out.append(c)
    return "".join(out)


def atbash(text):
    out = []
    for c in text:
        if "a" <= c <= "z":
            out.append(chr(219 - ord(c)))
        elif "A" <= c <= "Z":
            out.append(chr(155 - ord(c)))
        else:
            out.append(c)
    return "".join(out)


def encoders(root):
    src = show(root, "garak", "garak/probes/encoding.py")
    # garak's Braille table, read from its source.
    body = src.split("characterUnicodes = {", 1)[1].split("}", 1)[0]
    table = {k: chr(int(v, 16)) for k, v in re.findall(r'"(.+?)":\s*"\\u([0-9A-Fa-f]{4})"', body)}
    table[" "] = " "
    templates = [t.encode().decode("unicode_escape") for t in re.findall(r'^    "(.*)",$', src.split("TEMPLATES = [", 1)[1].split("]", 1)[0], re.M)]
    enc = {
        "BASE64": lambda t: base64.b64encode(t.encode()).decode(),
        "BASE16": lambda t: base64.b16encode(t.encode()).decode(),
        "BASE32": lambda t: base64.b32encode(t.encode()).decode(),
        "ASCII85": lambda t: base64.a85encode(t.encode()).decode(),
        "BASE85": lambda t: base64.b85encode(t.encode()).decode(),
        "hex": lambda t: binascii.b2a_hex(t.encode()).decode(),
        "ROT13": lambda t: caesar(t, 13),
        "Braille": lambda t: g_braille(t, table),
        "Morse": lambda t: " ".join(MORSE.get(c, "/") for c in t.upper() if c in MORSE or c == " "),
        "Nato": lambda t: " ".join(NATO[c] for c in t.upper() if c in NATO),
        "Atbash": atbash,
        "Caesar": lambda t: caesar(t, 3),
        "Caesar (shift 7)": lambda t: caesar(t, 7),
        "binary": lambda t: " ".join(format(b, "08b") for b in t.encode()),
        "decimal": lambda t: " ".join(str(b) for b in t.encode()),
        "base64 of ROT13": lambda t: base64.b64encode(caesar(t, 13).encode()).decode(),
    }
    return templates, enc


def encoded_instructions(root, R, payloads):
    templates, enc = encoders(root)
    short = sorted(p for p in payloads if len(p) <= 110)
    rows = []
    for name, f in enc.items():
        for _ in range(5):
            p = R.choice(short)
            t = R.choice(templates)
            text = t.replace("{encoding_name}", name).replace("{encoded_text}", f(p)).strip()
            if len(text) > CAPS["note"]:
                continue
            rows.append((f"encoded_instruction/{name.split(' ')[0].lower()}", field_for(text), text))
    return rows


def fake_secrets(R):
    def rs(n, alphabet=string.ascii_letters + string.digits):
        return "".join(R.choice(alphabet) for _ in range(n))

    up = string.ascii_uppercase + string.digits
    return [
        ("AWS_ACCESS_KEY_ID", "AKIA" + rs(16, up), "AWS_SECRET_ACCESS_KEY", rs(40, string.ascii_letters + string.digits + "+/")),
        ("GITHUB_TOKEN", "ghp_" + rs(36), None, None),
        ("SLACK_BOT_TOKEN", f"xoxb-{rs(11, string.digits)}-{rs(12, string.digits)}-{rs(24)}", None, None),
        ("STRIPE_SECRET_KEY", "sk_live_" + rs(24), None, None),
        ("OPENAI_API_KEY", "sk-proj-" + rs(48, string.ascii_letters + string.digits + "-_"), None, None),
        ("ANTHROPIC_API_KEY", "sk-ant-api03-" + rs(93, string.ascii_letters + string.digits + "-_") + "AA", None, None),
        ("GITLAB_TOKEN", "glpat-" + rs(20, string.ascii_letters + string.digits + "-_"), None, None),
        ("SENDGRID_API_KEY", "SG." + rs(22, string.ascii_letters + string.digits + "-_") + "." + rs(43, string.ascii_letters + string.digits + "-_"), None, None),
    ]


def encoded_secrets(R):
    rows = []
    for label, value, label2, value2 in fake_secrets(R):
        line = f"{label}={value}"
        rows.append(("encoded_secret/base64", "checkpoint" if len(line) < 140 else "note", f"env for the deploy job (base64): {base64.b64encode(line.encode()).decode()}"))
        rows.append(("encoded_secret/bare_base64", "note", base64.b64encode(value.encode()).decode()))
        rows.append(("encoded_secret/hex", "note", f"{label.lower()} as hex: {value.encode().hex()}"))
        rows.append(("encoded_secret/percent", "note", "".join(f"%{b:02X}" for b in line.encode())))
        rows.append(("encoded_secret/json_escaped", "note", json.dumps({label.lower(): value}).replace(value, "".join(f"\\u{ord(c):04x}" for c in value))))
        half = len(value) // 2
        notes = [
            {"key": "deploy.token_part1", "value": value[:half]},
            {"key": "deploy.token_part2", "value": value[half:]},
        ]
        rows.append(("encoded_secret/split_notes", "notes", json.dumps(notes)))
        if label2:
            notes = [{"key": "aws.key_id", "value": value}, {"key": "aws.secret", "value": value2}]
            rows.append(("encoded_secret/split_notes", "notes", json.dumps(notes)))
    return rows


# ------------------------------------------------------------------ benign
def runbook_chunks(root, R):
    rows = []
    for path in ls(root, "runbooks", "content/runbooks"):
        if not path.endswith(".md") or path.endswith("_index.md"):
            continue
        md = show(root, "runbooks", path)
        md = md.split("---", 2)[-1] if md.startswith("---") else md
        for section in re.split(r"\n#+ ", "\n" + md):
            body = unlink(section).strip()
            if len(body) < 60:
                continue
            rows.append(body)
    return [("runbook", "note", cut(b, CAPS["note"])) for b in R.sample(sorted(set(rows)), 120)]


def postmortems(root, R):
    md = show(root, "postmortems", "README.md")
    items = [unlink(l).strip() for l in md.splitlines() if l.startswith("[")]
    items = [i for i in items if len(i) > 60]
    return [("postmortem", "note", cut(i, CAPS["note"])) for i in R.sample(sorted(set(items)), 90)]


def user_tasks(root, legit):
    rows = []
    for line in show(root, "injecagent", "data/user_cases.jsonl").splitlines():
        if line.strip():
            t = json.loads(line)["User Instruction"]
            rows.append(("user_task", field_for(t), t))
    for t in legit:
        # Addresses and page markup are refused by design (a URL anywhere but
        # evidence_url), which is not what is measured.
        if re.search(r"https?:|www\.|\.(com|gov|org)\b|<", t):
            continue
        t = cut(t, CAPS["note"])
        rows.append(("user_task", field_for(t), t))
    return rows


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join("target", "heldout")
    R = random.Random(20261129)
    inj, attackers = injecagent(root, R)
    attacks, legit = proventra(root)
    unsafe = inj + bipia(root, R)
    unsafe += [("agent_attack", "note", cut(a, CAPS["note"])) for a in attacks]
    unsafe += encoded_instructions(root, R, attackers)
    unsafe += encoded_secrets(R)
    benign = runbook_chunks(root, R) + postmortems(root, R) + user_tasks(root, legit)
    os.makedirs(out, exist_ok=True)
    for name, rows in (("unsafe.tsv", unsafe), ("benign.tsv", benign)):
        seen = set()
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write("# held-out: built by tests/corpus/heldout/extract.py (see SOURCES.md); not committed\n")
            for kind, field, text in rows:
                if field != "notes":
                    text = cut(text, CAPS[field])
                if not text or text in seen:
                    continue
                seen.add(text)
                f.write(f"{kind}\t{field}\t{escape(text)}\n")
    print(f"wrote {len(unsafe)} unsafe and {len(benign)} benign rows to {out}")


if __name__ == "__main__":
    main()
