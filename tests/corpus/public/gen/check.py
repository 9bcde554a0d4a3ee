#!/usr/bin/env python3
"""Self-check for tests/corpus/public/{unsafe,benign}.tsv.

Checks column counts, classes and fields, escape validity, per-field length
caps (in Unicode scalar values, after unescaping), duplicate texts (within and
across the two files), minimum counts per category (the encoded ones and
the 22-language extension's too), per-language minimums for
injection/multilingual (10, or 8 for a transliteration) and for the `# lang:`
sections of benign/multilingual (5), and prints per-category counts.
Exit code 1 on error.
Uses only the standard library.
"""
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmt import unescape  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAPS = {
    "title": 120,
    "checkpoint": 200,
    "motto": 160,
    "constraint_value": 48,
    "tool": 48,
    "allowed_domain": 48,
    "evidence_url": 200,
    "receipt_name": 32,
    # a note's value (pointers.notes[].value)
    "note": 500,
}
# `notes`: a JSON array of {"key", "value"} notes placed together in one
# capsule (a credential split over two of them); checked by check_notes.
NOTES_FIELD = "notes"
NOTE_KEY = __import__("re").compile(r"^[a-z0-9_.:-]{1,48}$")
CLASSES = {"secret", "injection", "url"}
MIN_UNSAFE_TOTAL = 550
MIN_BENIGN_TOTAL = 550
MIN_MULTILINGUAL = 170
MIN_PER_MAJOR = 40
MAJOR = [
    "secret/vendor_token", "secret/crypto_key", "secret/password",
    "injection/override", "injection/tool_instruction", "injection/indirect",
    "injection/exfiltration", "injection/role_template", "injection/jailbreak",
    "injection/hidden_text", "injection/shell", "url/url",
]
ML_LANGS = 42
# languages written in a transliteration (Latin letters for a language usually
# written in another script): fewer samples each
TRANSLIT = {"Hinglish", "Arabizi", "Roman Urdu"}
MIN_PER_LANG, MIN_PER_TRANSLIT = 10, 8
# benign/multilingual lines under a `# lang:` comment (the 25 languages added
# with the 22-language extension): minimum per language
BENIGN_LANGS = 25
MIN_BENIGN_PER_LANG = 5
# categories added with the extension (hand-written and gen/build.py's RZ block)
MIN_EXTENSION = {
    "injection/indirect": 60, "injection/policy": 15, "injection/obfuscated": 25,
    "secret/disguised": 80, "benign/lookalike": 60,
}
# encoded samples (gen/build.py): minimum per category, unsafe and benign
MIN_ENCODED = {
    "injection/encoded": 40, "secret/encoded": 20, "url/encoded": 5,
    "benign/encoded_data": 60,
}
# the third extension (hand-written after the GENERATED block, and gen/build.py's RC block)
MIN_THIRD = {
    "injection/cipher": 35, "secret/split": 5, "injection/tool_output": 20,
    "injection/rehydrate_note": 15, "injection/policy_plain": 12, "injection/everyday": 20,
    "benign/runbook": 12, "benign/research_note": 8, "benign/support_note": 6,
    "benign/code_identifiers": 6, "benign/long_note": 5, "benign/decode_talk": 6,
    "benign/cipher_data": 10, "injection/goal": 20, "injection/response": 8, "benign/owner_task": 10,
    # the fourth extension (hand-written after the third)
    "injection/owner_voice": 30, "injection/answer_shape": 18, "injection/decode_frame": 10,
    "benign/owner_request": 12,
}


def check_notes(text):
    """Errors of a `notes` sample: a JSON array of 1-20 notes with valid keys,
    distinct, and values of 1-500 characters."""
    try:
        notes = json.loads(text)
    except ValueError as e:
        return [f"notes is not JSON: {e}"]
    if not isinstance(notes, list) or not 1 <= len(notes) <= 20:
        return ["notes must be an array of 1-20 notes"]
    errors, keys = [], set()
    for n in notes:
        if not isinstance(n, dict) or set(n) != {"key", "value"}:
            errors.append("a note must have exactly key and value")
            continue
        if not NOTE_KEY.match(n["key"]) or n["key"] in keys:
            errors.append(f"bad or repeated note key {n['key']!r}")
        keys.add(n["key"])
        if not 1 <= len(n["value"]) <= 500:
            errors.append("a note value must be 1-500 characters")
    return errors


def load(path, unsafe):
    errors = []
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if "\r" in line:
                errors.append(f"{path}:{n}: carriage return")
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) != 3:
                errors.append(f"{path}:{n}: expected 3 tab-separated columns, got {len(cols)}")
                continue
            cat, field, text = cols
            if unsafe:
                cls = cat.split("/", 1)[0]
                if cls not in CLASSES or "/" not in cat:
                    errors.append(f"{path}:{n}: bad class/category {cat!r}")
            elif not cat.startswith("benign/"):
                errors.append(f"{path}:{n}: benign category must start with benign/: {cat!r}")
            if field == NOTES_FIELD:
                try:
                    dec = unescape(text)
                except ValueError as e:
                    errors.append(f"{path}:{n}: {e}")
                    continue
                errors.extend(f"{path}:{n}: {e}" for e in check_notes(dec))
                rows.append((n, cat, field, dec))
                continue
            if field not in CAPS:
                errors.append(f"{path}:{n}: unknown field {field!r}")
                continue
            try:
                dec = unescape(text)
            except ValueError as e:
                errors.append(f"{path}:{n}: {e}")
                continue
            if not dec.strip():
                errors.append(f"{path}:{n}: empty text")
            if len(dec) > CAPS[field]:
                errors.append(f"{path}:{n}: {field} text is {len(dec)} chars > {CAPS[field]}")
            if text != text.strip():
                errors.append(f"{path}:{n}: leading/trailing whitespace in raw text")
            rows.append((n, cat, field, dec))
    return rows, errors


def main():
    unsafe, e1 = load(os.path.join(ROOT, "unsafe.tsv"), True)
    benign, e2 = load(os.path.join(ROOT, "benign.tsv"), False)
    errors = e1 + e2
    seen = {}
    for name, rows in (("unsafe", unsafe), ("benign", benign)):
        for n, cat, field, dec in rows:
            key = dec
            if key in seen:
                errors.append(f"{name}.tsv:{n}: duplicate text (first at {seen[key]})")
            else:
                seen[key] = f"{name}.tsv:{n}"
    for name, rows in (("unsafe", unsafe), ("benign", benign)):
        cats = collections.Counter(cat for _, cat, _, _ in rows)
        fields = collections.Counter(f for _, _, f, _ in rows)
        print(f"== {name}.tsv: {len(rows)} samples")
        for c, k in sorted(cats.items()):
            print(f"  {k:5d}  {c}")
        print("  fields: " + ", ".join(f"{f}={k}" for f, k in sorted(fields.items())))
    cats = collections.Counter(cat for _, cat, _, _ in unsafe)
    classes = collections.Counter(cat.split("/")[0] for _, cat, _, _ in unsafe)
    print("  classes: " + ", ".join(f"{c}={k}" for c, k in sorted(classes.items())))
    if len(unsafe) < MIN_UNSAFE_TOTAL:
        errors.append(f"only {len(unsafe)} unsafe samples (< {MIN_UNSAFE_TOTAL})")
    if len(benign) < MIN_BENIGN_TOTAL:
        errors.append(f"only {len(benign)} benign samples (< {MIN_BENIGN_TOTAL})")
    if cats["injection/multilingual"] < MIN_MULTILINGUAL:
        errors.append(f"only {cats['injection/multilingual']} multilingual samples")
    for c in MAJOR:
        if cats[c] < MIN_PER_MAJOR:
            errors.append(f"only {cats[c]} samples in {c} (< {MIN_PER_MAJOR})")
    bcats = collections.Counter(cat for _, cat, _, _ in benign)
    for c, k in list(MIN_ENCODED.items()) + list(MIN_EXTENSION.items()) + list(MIN_THIRD.items()):
        n = (bcats if c.startswith("benign/") else cats)[c]
        if n < k:
            errors.append(f"only {n} samples in {c} (< {k})")
    # multilingual: count per language tag from the preceding '# lang:' comments
    langs = collections.Counter()
    cur = None
    with open(os.path.join(ROOT, "unsafe.tsv"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("# lang:"):
                cur = line.split(":", 1)[1].strip()
            elif line.startswith("injection/multilingual\t") and cur:
                langs[cur] += 1
    if langs:
        print("  multilingual per language: " + ", ".join(f"{l}={k}" for l, k in sorted(langs.items())))
        if len(langs) < ML_LANGS:
            errors.append(f"multilingual covers {len(langs)} languages (< {ML_LANGS})")
        for l, k in langs.items():
            need = MIN_PER_TRANSLIT if l in TRANSLIT else MIN_PER_LANG
            if k < need:
                errors.append(f"multilingual {l}: only {k} samples (< {need})")
        missing = TRANSLIT - set(langs)
        if missing:
            errors.append(f"multilingual: no samples for {sorted(missing)}")
    blangs = collections.Counter()
    cur = None
    with open(os.path.join(ROOT, "benign.tsv"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                cur = line.split(":", 1)[1].strip() if line.startswith("# lang:") else None
            elif line.startswith("benign/multilingual\t") and cur:
                blangs[cur] += 1
    print("  benign multilingual per `# lang:` language: " + ", ".join(f"{l}={k}" for l, k in sorted(blangs.items())))
    if len(blangs) < BENIGN_LANGS:
        errors.append(f"benign multilingual covers {len(blangs)} `# lang:` languages (< {BENIGN_LANGS})")
    for l, k in blangs.items():
        if k < MIN_BENIGN_PER_LANG:
            errors.append(f"benign multilingual {l}: only {k} samples (< {MIN_BENIGN_PER_LANG})")
    for l in blangs:
        if l not in langs:
            errors.append(f"benign multilingual {l}: no unsafe samples in that language")
    if errors:
        print(f"\n{len(errors)} error(s):")
        for e in errors:
            print("  " + e)
        sys.exit(1)
    print("\nOK")


if __name__ == "__main__":
    main()
