"""API keys: hashes in a file, verification, reload on change, and a helper to make them.

The key file (``SDC_API_KEYS_FILE``) holds only hashes::

    {"keys": [{"id": "portal-filter", "role": "filter", "hash": "hmac-sha256$..."},
              {"id": "methods-team", "role": "analyst", "hash": "hmac-sha256$..."}]}

A key as callers send it is ``<id>.<secret>``: the id (not secret, written in logs) picks the
one entry to verify. Hashes are ``hmac-sha256$salt$digest`` (base64url; HMAC-SHA256 of the
whole key under a random per-entry salt), the format ``new`` and ``hash`` write, or the
earlier ``sha256$salt$digest`` (hex; SHA-256 of salt and key), still accepted.

Why a fast hash. API keys are long random secrets (``new`` makes 256-bit ones, and ``hash``
refuses short ones), so nobody can guess one from a stolen file whatever the hash costs: a
slow password KDF protects nothing here. It did cost availability and secrecy: scrypt took
45-70 ms per wrong key, one at a time in an unbounded queue, so a flood of wrong secrets
for a known id delayed a valid key that was not yet cached by tens of seconds, and the
time told which ids exist (a known id cost a scrypt, an unknown one nothing). Now every
verification runs inline in a few microseconds and does the same work whatever the key:
one HMAC-SHA256 and one SHA-256 (against the entry's salt for its own format, a random
dummy salt for the other, and dummy salts with an unmatchable digest for an unknown id),
then a constant-time comparison. So unknown and known ids take the same time, and a wrong
key costs about as much as parsing its request: no queue for wrong keys to fill, no cache.

``scrypt$`` entries (the earlier default) are refused: the service does not start with
them, and a reloaded file holding one is refused like any invalid file (the previous keys
stay in force). Keeping them would mean either a queue that wrong keys can fill or a
per-id lockout that an attacker, who only needs the public id, can trigger against the
key's owner; and the time would again tell those ids apart. The file holds no key, so
rehashing needs the keys themselves: issue callers new keys with ``new`` (or, for a key
you still hold, ``hash`` it).

The file is re-read when it changes (checked at most once a second): keys rotate without a
restart. A file that becomes unreadable or invalid leaves the previous keys in force and is
logged; it never opens the service.

Make a key::

    $ python -m service.api_keys new --id portal-filter --role filter
    key (give to the caller, shown once): portal-filter.Q2x...
    {"id": "portal-filter", "role": "filter", "hash": "hmac-sha256$..."}

or hash an existing one read from standard input:
``python -m service.api_keys hash --role analyst``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import secrets
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

#: What a key may see: the filter role gets decisions only, the analyst diagnostics too.
Role = Literal["filter", "analyst"]
ROLES: tuple[Role, ...] = get_args(Role)
KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: Hash formats in force; the first is the one new entries get.
METHODS = ("hmac-sha256", "sha256")
#: Shortest secret ``hash`` accepts: 128 bits written in base64url. A fast hash is safe
#: for random secrets only (``new`` makes 43-character ones).
MIN_SECRET_CHARS = 22
#: Longer presented keys are refused without hashing (whatever their id): bounded work.
MAX_KEY_CHARS = 512
RELOAD_INTERVAL = 1.0

log = logging.getLogger("sdc.keys")


class ApiKeyFileError(ValueError):
    """The key file cannot be used; the message names fields, never hashes."""


@dataclass(frozen=True)
class StoredHash:
    """A parsed hash of the key file."""

    method: str  # one of METHODS
    salt: bytes
    digest: bytes

    @classmethod
    def parse(cls, text: str) -> StoredHash:
        """``ValueError`` unless ``text`` is a hash in one of :data:`METHODS`."""
        parts = text.split("$")
        if len(parts) != 3 or parts[0] not in METHODS:
            raise ValueError("unknown hash format")
        if parts[0] == "sha256":
            salt, digest = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
        else:
            salt, digest = _unb64(parts[1]), _unb64(parts[2])
        if not salt or len(digest) != 32:
            raise ValueError("bad salt or digest length")
        return cls(parts[0], salt, digest)


@dataclass(frozen=True)
class ApiKeyEntry:
    id: str
    role: Role
    hash: str
    stored: StoredHash


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text):
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None


def _digest(method: str, salt: bytes, key: bytes) -> bytes:
    if method == "sha256":
        return hashlib.sha256(salt + key).digest()
    return hmac.digest(salt, key, "sha256")


def hash_key(key: str, *, method: str = METHODS[0]) -> str:
    """A salted hash of ``key`` for the key file (``method`` one of :data:`METHODS`; the
    older ``sha256`` is kept for files and tests that still write it)."""
    if method not in METHODS:
        raise ValueError(f"method: one of {', '.join(METHODS)}")
    salt = secrets.token_bytes(16)
    digest = _digest(method, salt, key.encode())
    if method == "sha256":
        return f"sha256${salt.hex()}${digest.hex()}"
    return f"{method}${_b64(salt)}${_b64(digest)}"


def verify(key: str, stored: str) -> bool:
    """Whether ``key`` matches the stored hash (constant-time comparison)."""
    try:
        parsed = StoredHash.parse(stored)
        raw = key.encode("utf-8", "surrogatepass")
    except ValueError:
        return False
    return hmac.compare_digest(_digest(parsed.method, parsed.salt, raw), parsed.digest)


def _check_hash(stored: object, where: str, key_id: str) -> StoredHash:
    if not isinstance(stored, str):
        raise ApiKeyFileError(f"{where}.hash: must be a string")
    if stored.startswith("scrypt$"):
        raise ApiKeyFileError(
            f"{where}.hash (id {key_id!r}): scrypt hashes are no longer accepted (a slow "
            "hash let wrong keys queue up and showed which ids exist); issue the caller a "
            "new key with: python -m service.api_keys new, or hash a key you hold with: "
            "python -m service.api_keys hash"
        )
    try:
        return StoredHash.parse(stored)
    except ValueError:
        raise ApiKeyFileError(
            f"{where}.hash: not a 'hmac-sha256$salt$digest' or "
            "'sha256$salt$digest' value (make one with: "
            "python -m service.api_keys new)"
        ) from None


def load_api_key_file(path: Path) -> dict[str, ApiKeyEntry]:
    """Read and check the key file: entries by id."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise ApiKeyFileError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise ApiKeyFileError(f"{path} is not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ApiKeyFileError(f"{path}: expected an object with a list 'keys'")
    entries: dict[str, ApiKeyEntry] = {}
    for i, item in enumerate(data["keys"]):
        where = f"keys.{i}"
        if not isinstance(item, dict):
            raise ApiKeyFileError(f"{where}: expected an object with id, role and hash")
        unknown = set(item) - {"id", "role", "hash", "comment"}
        if unknown:
            raise ApiKeyFileError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        key_id, role = item.get("id"), item.get("role")
        if not isinstance(key_id, str) or not KEY_ID.fullmatch(key_id):
            raise ApiKeyFileError(f"{where}.id: 1 to 64 letters, digits, '_' or '-'")
        if role not in ROLES:
            raise ApiKeyFileError(f"{where}.role: one of {', '.join(ROLES)}")
        if key_id in entries:
            raise ApiKeyFileError(f"{where}.id: {key_id!r} is used twice")
        stored = _check_hash(item.get("hash"), where, key_id)
        entries[key_id] = ApiKeyEntry(key_id, role, item["hash"], stored)
    return entries


def presented_id(key: str) -> str | None:
    """The id of a key of the form ``<id>.<secret>`` with a well-formed id, else ``None``:
    what a log may name of a presented key (a bare secret has no dot and is never named)."""
    key_id, dot, secret = key.partition(".")
    return key_id if dot and secret and KEY_ID.fullmatch(key_id) else None


def _file_version(path: Path):
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class ApiKeyStore:
    """The keys in force, re-read when the file changes; thread-safe."""

    def __init__(self, path: Path):
        self.path = path
        self._entries = load_api_key_file(path)
        self._version = _file_version(path)
        self._checked = time.monotonic()
        self._lock = threading.Lock()
        # Unknown ids are verified against this: a random salt and a digest no key can
        # match (the chance is 2**-256), so they cost what a known id costs.
        self._dummy = StoredHash(METHODS[0], secrets.token_bytes(16), secrets.token_bytes(32))

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if now - self._checked < RELOAD_INTERVAL:
            return
        with self._lock:
            if now - self._checked < RELOAD_INTERVAL:
                return
            self._checked = now
            version = _file_version(self.path)
            if version == self._version:
                return
            try:
                entries = load_api_key_file(self.path)
            except ApiKeyFileError as exc:
                log.error("key file not reloaded, previous keys stay in force: %s", exc)
                self._version = version
                return
            self._entries, self._version = entries, version
            log.info("key file reloaded: %d keys", len(entries))

    def verify(self, key: str) -> ApiKeyEntry | None:
        """The entry ``key`` proves, or ``None``. The same work for every key up to
        :data:`MAX_KEY_CHARS` (module docstring): one digest of each method, one
        constant-time comparison."""
        self._maybe_reload()
        if len(key) > MAX_KEY_CHARS:
            return None
        key_id, dot, secret = key.partition(".")
        entry = self._entries.get(key_id)
        stored = entry.stored if entry is not None else self._dummy
        raw = key.encode("utf-8", "surrogatepass")
        digests = {
            method: _digest(
                method, stored.salt if method == stored.method else self._dummy.salt, raw
            )
            for method in METHODS
        }
        ok = hmac.compare_digest(digests[stored.method], stored.digest)
        return entry if ok and entry is not None and dot and secret else None


def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m service.api_keys", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("new", "make a new random key and its entry"),
        ("hash", "hash a key read from standard input"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--role", choices=ROLES, required=True)
        p.add_argument("--id", help="key id (for 'hash', taken from the key if omitted)")
    args = parser.parse_args(argv)
    if args.command == "new":
        if not args.id or not KEY_ID.fullmatch(args.id):
            parser.error("--id: 1 to 64 letters, digits, '_' or '-'")
        key = f"{args.id}.{secrets.token_urlsafe(32)}"
        print(f"key (give to the caller, shown once): {key}", file=sys.stderr)
    else:
        key = sys.stdin.readline().strip()
        key_id = presented_id(key)
        if key_id is None or (args.id and args.id != key_id):
            parser.error("a key is '<id>.<secret>' with the id of --id")
        if len(key.partition(".")[2]) < MIN_SECRET_CHARS:
            parser.error(
                f"the secret must have at least {MIN_SECRET_CHARS} random "
                "characters (the hash is fast: safe for random secrets only; "
                "'new' makes one)"
            )
        if len(key) > MAX_KEY_CHARS:
            parser.error(f"a key has at most {MAX_KEY_CHARS} characters")
    entry = {"id": key.partition(".")[0], "role": args.role, "hash": hash_key(key)}
    print(json.dumps(entry))


if __name__ == "__main__":
    _main()
