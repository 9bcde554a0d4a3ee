#!/usr/bin/env python3
"""Re-checks the generated crypto samples independently of build.py.

Uses the PyPI packages `base58`, `mnemonic` and `pynacl`: every BIP39 phrase
has a valid checksum, every WIF / xprv / tprv passes Base58Check, and every
Solana secret key is 64 bytes whose second half is the Ed25519 public key of
the first half. In secret/disguised: every BIP39 phrase in any official
wordlist (also reversed, base64'd, numbered, comma-, dash- or newline-separated)
and every Standard SeedQR digit string decodes to a phrase with a valid
checksum, and every Amazon Bedrock long-term key (`ABSK`) is base64 of
`BedrockAPIKey-…:…`. Exit code 1 on any failure.
"""
import base64
import binascii
import os
import re
import sys
import unicodedata

import base58
import nacl.signing
from mnemonic import Mnemonic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmt import unescape  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M = Mnemonic("english")
WORDS = set(M.wordlist)
bad = 0
counts = {"bip39": 0, "wif": 0, "bip32": 0, "solana": 0}
for line in open(os.path.join(ROOT, "unsafe.tsv"), encoding="utf-8"):
    if not line.startswith("secret/crypto_key\t"):
        continue
    text = unescape(line.rstrip("\n").split("\t")[2])
    toks = re.findall(r"[a-z]+", text)
    for n in (24, 18, 15, 12):
        runs = [toks[i:i + n] for i in range(len(toks) - n + 1) if all(w in WORDS for w in toks[i:i + n])]
        if runs:
            counts["bip39"] += 1
            # a label word that is itself a BIP39 word ("seed", "phrase") may
            # shift the window: the sample is fine if one window checks out
            if not any(M.check(" ".join(r)) for r in runs):
                print("bad mnemonic checksum:", " ".join(runs[0])); bad += 1
            break
    for tok in re.findall(r"\b[1-9A-HJ-NP-Za-km-z]{50,112}\b", text):
        if tok[:4] in ("xprv", "tprv"):
            kind = "bip32"
        elif tok[0] in "5KL" and len(tok) in (51, 52):
            kind = "wif"
        elif len(tok) in (87, 88):
            kind = "solana"
        else:
            continue
        counts[kind] += 1
        if kind == "solana":
            raw = base58.b58decode(tok)
            ok = len(raw) == 64 and bytes(nacl.signing.SigningKey(raw[:32]).verify_key) == raw[32:]
        else:
            try:
                raw = base58.b58decode_check(tok)
                ok = len(raw) == (78 if kind == "bip32" else (33 if tok[0] == "5" else 34))
            except ValueError:
                ok = False
        if not ok:
            print(f"bad {kind}: {tok}"); bad += 1
print(counts)

# ---- secret/disguised (gen/build.py's RZ block)
LANGS = ["english", "spanish", "french", "italian", "portuguese", "czech", "japanese",
         "korean", "chinese_simplified", "chinese_traditional"]
ML = {lang: Mnemonic(lang) for lang in LANGS}
NFKD = {lang: {unicodedata.normalize("NFKD", w) for w in ML[lang].wordlist} for lang in LANGS}
TOKEN = re.compile(r"[\w\u0300-\u036f\u3099\u309a]+")


def phrase_runs(text):
    """(language, words) for every run of 12/15/18/24 consecutive wordlist words, longest first."""
    toks = [t for t in TOKEN.findall(unicodedata.normalize("NFKD", text)) if not t.isdigit()]
    out = []
    for lang in LANGS:
        for n in (24, 18, 15, 12):
            runs = [toks[i:i + n] for i in range(len(toks) - n + 1) if all(w in NFKD[lang] for w in toks[i:i + n])]
            if runs:
                out.append((lang, runs))
                break
    return out


def phrase_ok(lang, runs):
    m = ML[lang]
    for r in runs:
        for cand in (r, r[::-1]):
            if m.check(m.delimiter.join(cand)):
                return True
    return False


dcounts = {"bip39:" + l: 0 for l in LANGS}
dcounts.update({"seedqr": 0, "reversed": 0, "base64": 0, "bedrock": 0})
for line in open(os.path.join(ROOT, "unsafe.tsv"), encoding="utf-8"):
    if not line.startswith("secret/disguised\t"):
        continue
    text = unescape(line.rstrip("\n").split("\t")[2])
    views = [(text, None)]
    for blob in re.findall(r"[A-Za-z0-9+/]{40,}={0,2}", text):
        try:
            views.append((base64.b64decode(blob, validate=True).decode("utf-8"), "base64"))
        except (binascii.Error, UnicodeDecodeError, ValueError):
            pass
    views.append((text[::-1], "reversed"))
    found = False
    for view, how in views:
        hits = phrase_runs(view)
        if not hits:
            continue
        found = True
        if any(phrase_ok(lang, runs) for lang, runs in hits):
            lang = next(lang for lang, runs in hits if phrase_ok(lang, runs))
            dcounts["bip39:" + lang] += 1
            if how:
                dcounts[how] += 1
        else:
            print("bad mnemonic checksum in secret/disguised:", text[:80]); bad += 1
        break
    for digits in re.findall(r"(?<!\d)(\d{96}|\d{48})(?!\d)", text):
        words = [M.wordlist[int(digits[i:i + 4])] for i in range(0, len(digits), 4)
                 if int(digits[i:i + 4]) < 2048]
        dcounts["seedqr"] += 1
        if len(words) * 4 != len(digits) or not M.check(" ".join(words)):
            print("bad SeedQR:", digits); bad += 1
    for key in re.findall(r"\bABSK[A-Za-z0-9+/]{109,269}={0,2}", text):
        dcounts["bedrock"] += 1
        raw = base64.b64decode(key[4:]).decode()
        if not re.fullmatch(r"BedrockAPIKey-[a-z0-9]{4}-at-\d{12}:[A-Za-z0-9+/]+", raw):
            print("bad Bedrock key:", key); bad += 1
print(dcounts)
# the check must not be vacuous: every wordlist and form is present
for k, v in dcounts.items():
    if v == 0:
        print("no secret/disguised sample of kind", k); bad += 1
sys.exit(1 if bad else 0)
