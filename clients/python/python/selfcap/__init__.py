"""Self Capsule for Python: the service's own Rust core and client.

Offline, exactly as the service decides: `check` (schema, safety scan, size),
`canonicalize` (RFC 8785), `cursor`, `verify_export`. Identities live in the
same state directory as the `selfcap` command's (`Identity`), and `Client`
talks to a service as the command does (local first, signed reads of private
capsules). The identity's key can be rotated (`Client.rotate`; the key log,
docs/PROTOCOL.md §14) while its agent id stays. The whole command line,
`selfcap mcp` included, is the `selfcap` console script.
"""

import asyncio
import json
import logging
import os
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Union

from . import _native
from ._errors import (
    ClaimLaterError,
    KeyLogConflictError,
    LocalError,
    NotFoundError,
    ProtocolError,
    ReadSignatureError,
    Rejected,
    SelfcapError,
    UnavailableError,
    UnverifiedError,
    from_native,
)

__version__: str = _native.__version__

__all__ = [
    "Accepted",
    "AsyncClient",
    "AsyncWatch",
    "ClaimLaterError",
    "Client",
    "Head",
    "Identity",
    "KeyLog",
    "KeyLogConflictError",
    "LocalError",
    "NotFoundError",
    "ProtocolError",
    "ReadSignatureError",
    "Rejected",
    "Report",
    "Rotated",
    "SelfcapError",
    "UnavailableError",
    "UnverifiedError",
    "Watch",
    "canonicalize",
    "check",
    "cursor",
    "template",
    "verify_export",
]

Json = Any
StrPath = Union[str, "PathLike[str]"]


def _text(obj: Json) -> str:
    """JSON text of a Python value, as a Python client would send it. Floats keep
    their shortest round-trip form, so the core reads the same double; NaN and
    infinities are refused (JSON has none)."""
    return json.dumps(obj, allow_nan=False, separators=(",", ":"))


def canonicalize(obj: Json) -> bytes:
    """The RFC 8785 canonical bytes of `obj` (what is hashed and signed)."""
    return _native.canonicalize(_text(obj))


def cursor(capsule: Json) -> str:
    """`"sha256:"` + the hex SHA-256 of the capsule's canonical bytes."""
    return _native.cursor(_text(capsule))


def check(capsule: Json, tier: str = "free") -> None:
    """Runs the service's checks of a capsule on its own, in its order: the
    self_capsule_v0 schema, the safety scan, then the size limit of `tier`
    ("free", "pro", "plus"). Returns None when the service would accept the
    capsule; raises `Rejected` with the codes, findings and status it would
    answer otherwise."""
    refused = _native.check(_text(capsule), tier)
    if refused is not None:
        raise Rejected(json.loads(refused))


def template(agent_id: str) -> Dict[str, Any]:
    """A minimal valid capsule for `agent_id`, to start from (as `selfcap template`)."""
    return json.loads(_native.template(agent_id))


@dataclass(frozen=True)
class Report:
    """A history verification report (the body of verify.json): `valid` only
    when every check passed; `failing` names the checks that did not."""

    agent_id: str
    valid: bool
    level: str
    cursor: Optional[str]
    seq: Optional[int]
    checks: Dict[str, Any]
    warnings: List[str]
    withheld: List[int] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def failing(self) -> List[str]:
        """The checks that failed, in the report's fixed order."""
        return [name for name, c in self.checks.items() if not c.get("ok")]

    def __bool__(self) -> bool:
        return self.valid

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Report":
        return cls(
            agent_id=d.get("agent_id", ""),
            valid=bool(d.get("valid")),
            level=d.get("level", ""),
            cursor=d.get("cursor"),
            seq=d.get("seq"),
            checks=dict(d.get("checks") or {}),
            warnings=list(d.get("warnings") or []),
            withheld=list(d.get("withheld") or []),
            raw=d,
        )


def verify_export(export: Json, keyring: Optional[Json] = None) -> Report:
    """Verifies an export bundle (export.json) offline, as `selfcap verify
    --export` does: against `keyring` (a saved GET /api/v1/self/keys body) when
    given, else against the bundle's own keys (with a warning in the report).
    Never raises for a bundle that does not verify: read `Report.valid`."""
    keys = None if keyring is None else _text(keyring)
    return Report.from_dict(json.loads(_native.verify_export(_text(export), keys)))


class Identity:
    """An agent's Ed25519 identity in a state directory, the same one the
    `selfcap` command uses (`$SELFCAP_HOME/<agent_id>`, default
    `~/.selfcap/<agent_id>`). The private key never leaves its file.

    `agent_id` is the SHA-256 of the genesis key and never changes;
    `public_key` is the current key (the one that signs) and `key_index` its
    place in the agent's key log (0: the genesis key; each rotation adds one).
    The directory also holds `next.key`, the committed next key, which only the
    key commands (`Client.rotate` and the like) ever load. `Client`'s key
    commands refresh the identity they were given; `refresh()` re-reads one
    rotated by another process."""

    def __init__(self, agent_id: str, public_key: str, state_dir: str, key_index: int = 0) -> None:
        self.agent_id = agent_id
        self.public_key = public_key
        self.state_dir = state_dir
        self.key_index = key_index

    def __repr__(self) -> str:
        return f"Identity(agent_id={self.agent_id!r}, key_index={self.key_index}, state_dir={self.state_dir!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and (self.agent_id, self.state_dir) == (
            other.agent_id,
            other.state_dir,
        )

    def __hash__(self) -> int:
        return hash((self.agent_id, self.state_dir))

    @classmethod
    def _from(cls, text: str) -> "Identity":
        d = json.loads(text)
        return cls(d["agent_id"], d["public_key"], d["state_dir"], d.get("key_index", 0))

    def refresh(self) -> "Identity":
        """Re-reads the current key (`public_key`, `key_index`) from the state
        directory, in place (after a rotation by another process); returns self."""
        d = json.loads(_call(_native.identity_at, self.state_dir))
        self.public_key = d["public_key"]
        self.key_index = d.get("key_index", 0)
        return self

    @classmethod
    def create(cls, home: Optional[StrPath] = None) -> "Identity":
        """A new identity in `home` (default: $SELFCAP_HOME, else ~/.selfcap),
        as `selfcap keygen` makes it."""
        return cls._from(_call(_native.identity_create, _path(home)))

    @classmethod
    def load(cls, home: Optional[StrPath] = None, agent: Optional[str] = None) -> "Identity":
        """The identity in `home` (default as for `create`); `agent` (an agent id
        or a unique prefix) picks one when there are several."""
        return cls._from(_call(_native.identity_load, _path(home), agent))


def _path(p: Optional[StrPath]) -> Optional[str]:
    return None if p is None else os.fspath(p)


def _call(fn: Any, *args: Any) -> Any:
    """Calls the native module, turning its failure into this package's exception."""
    try:
        return fn(*args)
    except _native.NativeError as e:
        raise from_native(e) from None


@dataclass(frozen=True)
class Head:
    """An agent's head.json: its current `cursor` and `seq`, its tier and write
    quota, its key log's summary. `etag` is what to pass back to
    `Client.head(etag=...)`: the service's ETag for it (which follows key
    events, which change the head but not the cursor)."""

    agent_id: str
    cursor: str
    seq: int
    changed: bool
    tier: str
    raw: Dict[str, Any] = field(repr=False)
    served_etag: Optional[str] = field(default=None, repr=False)

    @property
    def etag(self) -> str:
        """The ETag head.json was served with (the cursor's hex for a head
        built by hand)."""
        return self.served_etag or self.cursor.split(":", 1)[-1]

    @property
    def writes(self) -> Dict[str, Any]:
        """The write quota as of this read (`used`, `limit`, `remaining`, ...)."""
        return dict(self.raw.get("writes") or {})

    @property
    def keys(self) -> Optional[Dict[str, Any]]:
        """The key log's summary (`index`, `public_key`, `length`, `head_hash`,
        `pending_recommit`, ...), or None for an agent without a key log."""
        k = self.raw.get("keys")
        return None if k is None else dict(k)

    @classmethod
    def from_dict(cls, d: Dict[str, Any], etag: Optional[str] = None) -> "Head":
        return cls(d["agent_id"], d["cursor"], d["seq"], bool(d.get("changed")), d.get("tier", "free"), d, etag)

    @classmethod
    def _served(cls, text: str) -> "Head":
        """A head as the native module answers it: `{"head", "etag"}`."""
        d = json.loads(text)
        return cls.from_dict(d["head"], d["etag"])


@dataclass(frozen=True)
class Accepted:
    """A publish: the `seq` and `cursor` now current. `sent` is False when the
    capsule equalled the last accepted one (nothing was sent, no write spent);
    `body` is the service's accepted-write answer when one was sent."""

    seq: int
    cursor: str
    sent: bool
    confirmed_from_head: bool = False
    body: Optional[Dict[str, Any]] = field(default=None, repr=False)


@dataclass(frozen=True)
class KeyLog:
    """An agent's key log (keys.json) as `selfcap keys --json` reports it:
    verified offline against the service's keyring (`valid`, `failures`) and
    compared with the pin kept in the state directory (`pin["status"]`:
    "new", "consistent" or "unpinned"). `keys` is the summary the log folds to
    (`index`, `public_key`, `pending_recommit`, ...; None without a log) and
    `events` one line per event (public members only: no key material)."""

    agent_id: str
    valid: bool
    length: int
    keys: Optional[Dict[str, Any]]
    pin: Dict[str, Any]
    failures: List[Dict[str, Any]]
    events: List[Dict[str, Any]]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    def __bool__(self) -> bool:
        return self.valid

    @property
    def index(self) -> int:
        """The current key's index (0: the genesis key, also without a log)."""
        return int((self.keys or {}).get("index", 0))

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "KeyLog":
        return cls(
            agent_id=d["agent_id"],
            valid=bool(d.get("valid")),
            length=int(d.get("length") or 0),
            keys=d.get("keys"),
            pin=dict(d.get("pin") or {}),
            failures=list(d.get("failures") or []),
            events=list(d.get("events") or []),
            raw=d,
        )


@dataclass(frozen=True)
class Rotated:
    """What a key command did (`Client.rotate`, `recommit`, `recover`): the
    event's `kind` ("rotation", "recommit" or "recovery"), `applied` ("new", or
    "already_applied" for a resumed event the service had), its `index` in the
    log, `resumed` when an earlier interrupted run's signed request was resent,
    the current key after it (`public_key`), the log's summary after it
    (`keys`), and the write a disputing rotation re-published (`write`)."""

    kind: str
    applied: str
    index: int
    resumed: bool
    public_key: str
    keys: Optional[Dict[str, Any]]
    write: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Rotated":
        return cls(
            d["kind"], d["applied"], d["index"], bool(d.get("resumed")), d["public_key"], d.get("keys"), d.get("write"), d
        )


class Client:
    """A Self Capsule service at `url`, for `identity` (default: the one the
    `selfcap` command would use: $SELFCAP_STATE_DIR, else the only identity in
    $SELFCAP_HOME or ~/.selfcap). Reads of other agents need no identity;
    reads of a private capsule are signed when this identity has a key.
    Every call blocks (with the GIL released) for at most `timeout` seconds
    per request, retrying network errors and 5xx `retries` times."""

    def __init__(
        self, url: str, identity: Optional[Identity] = None, timeout: float = 30, retries: int = 3
    ) -> None:
        self.url = url.rstrip("/")
        self.identity = identity
        self.timeout = timeout
        self._cfg = json.dumps(
            {
                "url": self.url,
                "state_dir": identity.state_dir if identity is not None else None,
                "timeout": float(timeout),
                "retries": int(retries),
            }
        )

    def __repr__(self) -> str:
        return f"Client({self.url!r}, identity={self.identity!r})"

    def bootstrap(self) -> Dict[str, Any]:
        """Registers this identity with the service (stateless there) and stores
        its URLs, as `selfcap bootstrap`."""
        return json.loads(_call(_native.client_bootstrap, self._cfg))

    def publish(self, capsule: Json) -> Accepted:
        """Local first: checks the capsule as the service would, saves it as this
        identity's desired capsule (capsule.json), then signs it with the next seq
        and sends it unless it equals the last accepted one. Raises `Rejected`
        (locally or from the service; the capsule stays saved), or another
        `SelfcapError` when the service cannot be reached."""
        out = json.loads(_call(_native.client_publish, self._cfg, _text(capsule)))
        return Accepted(out["seq"], out["cursor"], out["sent"], out["confirmed_from_head"], out["accepted"])

    def head(self, agent_id: Optional[str] = None, etag: Optional[str] = None) -> Optional[Head]:
        """An agent's head (default: this identity's). With `etag` (a previous
        `Head.etag`): None while nothing changed (HTTP 304). A key event changes
        the head (its `keys`) and its ETag, not its cursor, so a bare cursor
        matches only while the agent has no key log."""
        out = _call(_native.client_head, self._cfg, agent_id, etag)
        return None if out == "null" else Head._served(out)

    def read(self, agent_id: Optional[str] = None) -> Dict[str, Any]:
        """An agent's capsule (default: this identity's), checked against its cursor."""
        return json.loads(_call(_native.client_read, self._cfg, agent_id))

    def history(
        self, agent_id: Optional[str] = None, since: Optional[str] = None, limit: Optional[int] = None
    ) -> Dict[str, Any]:
        """One page of an agent's retained versions, newest first (history.json):
        `versions`, `retained`, `pruned`, `next`; `since` a cursor."""
        return json.loads(_call(_native.client_history, self._cfg, agent_id, since, limit))

    def export(self, agent_id: Optional[str] = None) -> Dict[str, Any]:
        """An agent's history as an offline-verifiable bundle (export.json)."""
        return json.loads(_call(_native.client_export, self._cfg, agent_id))

    def rehydrate(self, format: str = "text") -> str:
        """Local-first rehydration after a restart: the newer of this identity's
        local copy and the service's, stored locally, as the deterministic recovery
        prompt ("text" or "markdown"). Works offline from the local copy."""
        return json.loads(_call(_native.client_rehydrate, self._cfg, format))["prompt"]

    def verify(self, agent_id: Optional[str] = None) -> Report:
        """Downloads an agent's export and verifies it locally against the
        service's published keyring (as `selfcap verify`)."""
        return Report.from_dict(json.loads(_call(_native.client_verify, self._cfg, agent_id)))

    def watch(self, agent_id: Optional[str] = None, *, channel: str = "auto") -> "Watch":
        """An agent's heads as they change (default: this identity's), as
        `selfcap watch` follows them: an iterator of `Head`, the current one
        first, then each new one (its cursor differs from the last one given).
        Over a WebSocket, falling back to long-poll (`channel`: "auto",
        "websocket" or "longpoll"), signed when the capsule is private,
        reconnecting with backoff forever. Blocks with the GIL released; Ctrl-C
        raises KeyboardInterrupt. Ends when stopped (`Watch.close()`, leaving a
        `with` block, or dropping the iterator, e.g. by `break`), or raises
        `NotFoundError` once the capsule is not readable by this identity and
        `ReadSignatureError` when the service refuses the read signature.
        Progress (connected, retrying, switching) is logged on the "selfcap"
        logger."""
        return Watch(_call(_native.client_watch, self._cfg, agent_id, channel))

    def keys(self, agent_id: Optional[str] = None) -> KeyLog:
        """An agent's key log (default: this identity's), as `selfcap keys`:
        verified offline against the service's published keyring, compared with
        the pin kept in this identity's state directory, which then moves
        forward. Raises `KeyLogConflictError` when the service served a log
        shorter than the pinned one or another event at a pinned position
        (the pin is kept). A log that does not verify is returned with
        `valid` False (and leaves the pin alone)."""
        return KeyLog.from_dict(json.loads(_call(_native.client_keys, self._cfg, agent_id)))

    def keys_init(self, recovery_digest: Optional[str] = None) -> Dict[str, Any]:
        """Starts the key log of an identity that published before it had one
        (`selfcap keys init`): creates next.key if missing and submits the
        inception alone. A new identity needs none: its first publish carries
        it. `recovery_digest` commits an operator's recovery key (the hex
        SHA-256 of its 32-byte public key). The service's answer (`applied`,
        `index`, `keys`)."""
        out = json.loads(_call(_native.client_keys_init, self._cfg, recovery_digest))
        self._refresh_identity()
        return out

    def rotate(
        self, compromised: bool = False, last_good: Optional[int] = None, recovery_digest: Optional[str] = None
    ) -> Rotated:
        """Rotates to the committed next key (`selfcap rotate`): next.key becomes
        the current key and a fresh next key is committed; the agent id stays.
        Crash-safe as the command is: the new key and the signed request are on
        disk before anything is sent, and a later call resends an interrupted
        one first. `compromised=True, last_good=SEQ`: the current key was
        stolen; the writes it made after the owner's write at SEQ are disputed
        and the desired capsule is re-published at SEQ+1 with the new key.
        Refusals raise `Rejected` with the service's reason codes; a key log
        that rolled back or forked raises `KeyLogConflictError`."""
        return self._key_command(_native.client_rotate, compromised, last_good, recovery_digest)

    def recommit(self, recovery_digest: Optional[str] = None) -> Rotated:
        """For an owner who lost next.key (`selfcap recommit`): the current key
        commits a fresh next key (kept in next.key.recommit). It takes effect
        only after the agent's recovery window (`keys["pending_recommit"]`),
        and only if no rotation lands first."""
        return self._key_command(_native.client_recommit, recovery_digest)

    def recover(
        self, recovery_key_path: StrPath, supersedes: Optional[int] = None, recovery_digest: Optional[str] = None
    ) -> Rotated:
        """The operator's recovery (`selfcap recover`): a rotation revealing the
        committed recovery key (its seed file, mode 0600, as `key` is) to a new
        current key generated here. `supersedes` (an event index) voids that
        next-key rotation while its window is open. The recovery key is spent:
        `recovery_digest` commits a new one."""
        return self._key_command(_native.client_recover, os.fspath(recovery_key_path), supersedes, recovery_digest)

    def _key_command(self, fn: Any, *args: Any) -> Rotated:
        r = Rotated.from_dict(json.loads(_call(fn, self._cfg, *args)))
        if r.resumed:
            _log.info("an earlier run left a %s pending: resent the same bytes", r.kind)
        self._refresh_identity()
        return r

    def _refresh_identity(self) -> None:
        if self.identity is not None:
            self.identity.refresh()


_log = logging.getLogger("selfcap")


class Watch(Iterator[Head]):
    """A running watch (`Client.watch`): iterate it for heads. The watch runs
    on a thread of its own in the Rust client; `close()` (or leaving a `with`
    block, or dropping the last reference) stops it."""

    def __init__(self, native: Any) -> None:
        self._native = native

    def __iter__(self) -> "Watch":
        return self

    def __next__(self) -> Head:
        while True:
            item = _call(self._native.next)
            if item is None:
                raise StopIteration
            kind, payload = item
            if kind == "note":
                _log.info("%s", payload)
                continue
            return Head._served(payload)

    def close(self, timeout: float = 5.0) -> bool:
        """Stops the watch and waits up to `timeout` seconds for the Rust side
        to finish: a WebSocket is closed within 0.1 s and a backoff sleep ends
        at once; a long-poll request in flight (at most 25 s) is left to end on
        its own, delivering nothing. True when it has finished."""
        return bool(self._native.close(timeout))

    @property
    def stopped(self) -> bool:
        """Whether the watch was asked to stop."""
        return bool(self._native.stopped)

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_END = object()


class AsyncWatch(AsyncIterator[Head]):
    """`AsyncClient.watch`: a `Watch` read from a worker thread, as an async
    iterator (`async for head in client.watch(): ...`). `aclose()` (or leaving
    an `async with` block) stops it."""

    def __init__(self, watch: Watch) -> None:
        self._watch = watch

    def __aiter__(self) -> "AsyncWatch":
        return self

    async def __anext__(self) -> Head:
        head = await asyncio.to_thread(next, self._watch, _END)
        if head is _END:
            raise StopAsyncIteration
        return head  # type: ignore[return-value]

    async def aclose(self, timeout: float = 5.0) -> bool:
        """Stops the watch, as `Watch.close`."""
        return await asyncio.to_thread(self._watch.close, timeout)

    @property
    def stopped(self) -> bool:
        return self._watch.stopped

    async def __aenter__(self) -> "AsyncWatch":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncClient:
    """`Client` for asyncio: the same calls, each run by the sync one in a
    worker thread (`asyncio.to_thread`), so the event loop never blocks;
    `watch` is an async iterator. Same arguments, same exceptions."""

    def __init__(
        self, url: str, identity: Optional[Identity] = None, timeout: float = 30, retries: int = 3
    ) -> None:
        self.sync = Client(url, identity=identity, timeout=timeout, retries=retries)
        self.url = self.sync.url
        self.identity = identity
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"AsyncClient({self.url!r}, identity={self.identity!r})"

    async def bootstrap(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.bootstrap)

    async def publish(self, capsule: Json) -> Accepted:
        return await asyncio.to_thread(self.sync.publish, capsule)

    async def head(self, agent_id: Optional[str] = None, etag: Optional[str] = None) -> Optional[Head]:
        return await asyncio.to_thread(self.sync.head, agent_id, etag)

    async def read(self, agent_id: Optional[str] = None) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.read, agent_id)

    async def history(
        self, agent_id: Optional[str] = None, since: Optional[str] = None, limit: Optional[int] = None
    ) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.history, agent_id, since, limit)

    async def export(self, agent_id: Optional[str] = None) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.export, agent_id)

    async def rehydrate(self, format: str = "text") -> str:
        return await asyncio.to_thread(self.sync.rehydrate, format)

    async def verify(self, agent_id: Optional[str] = None) -> Report:
        return await asyncio.to_thread(self.sync.verify, agent_id)

    async def keys(self, agent_id: Optional[str] = None) -> KeyLog:
        return await asyncio.to_thread(self.sync.keys, agent_id)

    async def keys_init(self, recovery_digest: Optional[str] = None) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.keys_init, recovery_digest)

    async def rotate(
        self, compromised: bool = False, last_good: Optional[int] = None, recovery_digest: Optional[str] = None
    ) -> Rotated:
        return await asyncio.to_thread(self.sync.rotate, compromised, last_good, recovery_digest)

    async def recommit(self, recovery_digest: Optional[str] = None) -> Rotated:
        return await asyncio.to_thread(self.sync.recommit, recovery_digest)

    async def recover(
        self, recovery_key_path: StrPath, supersedes: Optional[int] = None, recovery_digest: Optional[str] = None
    ) -> Rotated:
        return await asyncio.to_thread(self.sync.recover, recovery_key_path, supersedes, recovery_digest)

    def watch(self, agent_id: Optional[str] = None, *, channel: str = "auto") -> AsyncWatch:
        """`Client.watch` as an async iterator. Starting it only reads local
        state (the identity), so it is not awaited."""
        return AsyncWatch(self.sync.watch(agent_id, channel=channel))
