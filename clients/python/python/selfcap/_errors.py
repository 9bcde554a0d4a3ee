"""The package's exceptions: the client library's failures, by kind, with the
service's reason codes and what to do about them."""

import json
from typing import Any, Dict, List, Optional


class SelfcapError(Exception):
    """Any failure of a selfcap call. `exit_code` is the `selfcap` command's
    exit code for the same failure (docs/CLI.md's table)."""

    exit_code: int = 1
    reason_codes: List[str] = []
    what_to_do: List[str] = []

    def __init__(self, message: str, exit_code: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code


class LocalError(SelfcapError):
    """Bad input or local state: no identity, unreadable key file, no service URL."""


class UnavailableError(SelfcapError):
    """The service could not be reached, or kept failing, after the retries."""


class ProtocolError(UnavailableError):
    """The service answered something outside the protocol."""


class NotFoundError(SelfcapError):
    """Nothing there: no capsule published for that agent (or private, not granted)."""


class UnverifiedError(SelfcapError):
    """A verification did not pass."""


class ReadSignatureError(SelfcapError):
    """The service refused a signed read's signature (check the key and the clock)."""


class ClaimLaterError(SelfcapError):
    """A payment could not be verified now; nothing was credited, claim it later."""


class KeyLogConflictError(SelfcapError):
    """The service served an agent's key log that contradicts the one pinned
    here (key_pins.json in the state directory): shorter (a rollback) or
    another event at a pinned position (a fork). Both are sealed by the
    service, so it equivocated or its key leaked; nothing was changed and the
    pin is kept (the `selfcap` command exits 10). `key_log` is the served
    log's view (as `Client.keys` answers it) when the read was `Client.keys`,
    with `pin` saying how it compared; None when a key command refused to act."""

    exit_code = 10

    def __init__(self, message: str, exit_code: Optional[int] = None, key_log: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message, exit_code)
        self.key_log = key_log
        self.pin: Optional[Dict[str, Any]] = None if key_log is None else key_log.get("pin")


class Rejected(SelfcapError):
    """A write refused, by the service or by the same checks run locally (`check`).

    `reason_codes` are the service's wire names, `findings` where and why (never the
    offending text), `status` the HTTP status the service answers (or would),
    `what_to_do` the service's advice for the codes, and `body` the whole rejection."""

    def __init__(self, body: Dict[str, Any]) -> None:
        self.body = body
        self.status: int = int(body.get("status") or 0)
        self.reason_codes = list(body.get("reason_codes") or [])
        self.findings: List[Dict[str, Any]] = list(body.get("findings") or [])
        self.detail: Optional[str] = body.get("detail")
        self.what_to_do = list(body.get("what_to_do") or [])
        self.retry_after_sec: Optional[int] = body.get("retry_after_sec")
        self.next_write_at: Optional[str] = body.get("next_write_at")
        self.max_bytes: Optional[int] = body.get("max_bytes")
        self.observed_bytes: Optional[int] = body.get("observed_bytes")
        self.local: bool = bool(body.get("local"))
        codes = ", ".join(self.reason_codes) or "no reason code"
        where = "refused locally, nothing sent" if self.local else f"HTTP {self.status}"
        message = f"write rejected ({where}: {codes})"
        if self.detail:
            message += f": {self.detail}"
        super().__init__(message, body.get("exit_code"))


_KINDS = {
    "local": LocalError,
    "unavailable": UnavailableError,
    "protocol": ProtocolError,
    "not_found": NotFoundError,
    "unverified": UnverifiedError,
    "read_signature": ReadSignatureError,
    "claim_later": ClaimLaterError,
}


def from_native(error: Exception) -> SelfcapError:
    """The exception for a `_native.NativeError` (its argument: a JSON object)."""
    info = json.loads(error.args[0])
    if info["kind"] == "rejected":
        return Rejected(info["rejection"])
    if info["kind"] == "key_log_conflict":
        return KeyLogConflictError(info["message"], info.get("exit_code"), info.get("key_log"))
    return _KINDS.get(info["kind"], SelfcapError)(info["message"], info.get("exit_code"))
