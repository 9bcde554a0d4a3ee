"""Shared fixtures of the package's tests. They run against the *installed*
wheel (tests/e2e/python_package.test.mjs builds it and installs it into a
fresh virtual environment), never the source tree: `installed` fails the run
if `import selfcap` found anything else."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

# The repository's conformance vectors: made by hand or by an independent
# implementation, never read off this package.
VECTORS = Path(os.environ.get("SELFCAP_VECTORS", Path(__file__).resolve().parents[3] / "tests" / "vectors"))


def vector(name: str):
    with open(VECTORS / name, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="session", autouse=True)
def installed():
    """The package under test is the one installed in this interpreter's
    environment (site-packages), with its console script beside it."""
    import selfcap

    where = Path(selfcap.__file__).resolve()
    assert "site-packages" in where.parts, f"selfcap imported from {where}, not an installed wheel"
    assert Path(sys.prefix).resolve() in where.parents
    assert selfcap_command() is not None


def selfcap_command() -> str:
    """The installed `selfcap` console script of this environment."""
    bindir = Path(sys.executable).parent
    found = shutil.which("selfcap", path=str(bindir))
    assert found, f"no selfcap command in {bindir}"
    return found


@pytest.fixture
def home(tmp_path):
    """An empty identities' home, and no SELFCAP_* variable leaking in."""
    for name in ("SELFCAP_HOME", "SELFCAP_STATE_DIR", "SELFCAP_AGENT", "SELFCAP_URL"):
        os.environ.pop(name, None)
    h = tmp_path / "home"
    h.mkdir()
    return h


def place_vector_key(home: Path) -> Path:
    """The signing vector's identity (its RFC 8032 seed) as a state directory
    in `home`, named by its agent id as `selfcap keygen` names them."""
    v = vector("signing.json")
    d = home / v["agent_id"]
    d.mkdir(parents=True)
    key = d / "key"
    key.write_text(v["seed_hex"] + "\n")
    key.chmod(0o600)
    return d
