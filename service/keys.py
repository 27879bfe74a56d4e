"""API keys: hashes in a file, verification, reload on change, and a helper to make them.

The key file (``SDC_API_KEYS_FILE``) holds only hashes::

    {"keys": [{"id": "portal-filter", "role": "filter", "hash": "scrypt$16384$8$1$..."},
              {"id": "methods-team", "role": "analyst", "hash": "scrypt$16384$8$1$..."}]}

A key as callers send it is ``<id>.<secret>``: the id (not secret, written in logs) picks the
one entry to verify, so an unknown id costs nothing and a known one costs one hash. Hashes
are salted scrypt (``scrypt$n$r$p$salt$hash``, base64url) or salted SHA-256
(``sha256$salt$hash``, hex; enough for the 256-bit random secrets ``new`` makes). A verified
key is remembered in memory (under an HMAC with a per-process secret, never the key itself)
so the slow hash runs once per key and process, not per request.

The file is re-read when it changes (checked at most once a second): keys rotate without a
restart. A file that becomes unreadable or invalid leaves the previous keys in force and is
logged; it never opens the service.

Make a key::

    $ python -m service.keys new --id portal-filter --role filter
    key (give to the caller, shown once): portal-filter.Q2x...
    entry (add to SDC_API_KEYS_FILE): {"id": "portal-filter", "role": "filter", "hash": "scrypt$..."}

or hash an existing one read from standard input: ``python -m service.keys hash --role analyst``.
"""

from __future__ import annotations

import argparse
import base64
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

ROLES = ("filter", "analyst")
KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: scrypt cost of new hashes: about 50 ms and 16 MiB once per key and process.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
_CACHE_LIMIT = 4096
RELOAD_INTERVAL = 1.0

log = logging.getLogger("sdc.keys")


class KeyFileError(ValueError):
    """The key file cannot be used; the message names fields, never hashes."""


@dataclass(frozen=True)
class KeyEntry:
    id: str
    role: str
    hash: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hash_key(key: str, *, method: str = "scrypt") -> str:
    """A salted hash of ``key`` for the key file."""
    salt = secrets.token_bytes(16)
    if method == "sha256":
        return f"sha256${salt.hex()}${hashlib.sha256(salt + key.encode()).hexdigest()}"
    digest = hashlib.scrypt(key.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P,
                            maxmem=64 * 1024 * 1024)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def verify(key: str, stored: str) -> bool:
    """Whether ``key`` matches the stored hash (constant-time comparison)."""
    parts = stored.split("$")
    if parts[0] == "sha256" and len(parts) == 3:
        got = hashlib.sha256(bytes.fromhex(parts[1]) + key.encode()).hexdigest()
        return hmac.compare_digest(got, parts[2])
    if parts[0] == "scrypt" and len(parts) == 6:
        n, r, p = map(int, parts[1:4])
        expected = _unb64(parts[5])
        got = hashlib.scrypt(key.encode(), salt=_unb64(parts[4]), n=n, r=r, p=p,
                             maxmem=256 * 1024 * 1024, dklen=len(expected))
        return hmac.compare_digest(got, expected)
    return False


def _check_hash(stored: object, where: str) -> str:
    if not isinstance(stored, str):
        raise KeyFileError(f"{where}.hash: must be a string")
    parts = stored.split("$")
    try:
        if parts[0] == "sha256" and len(parts) == 3:
            bytes.fromhex(parts[1])
            if len(parts[2]) == 64:
                return stored
        elif parts[0] == "scrypt" and len(parts) == 6:
            n, r, p = map(int, parts[1:4])
            if n >= 2 and n & (n - 1) == 0 and r > 0 and p > 0 and _unb64(parts[4]) and _unb64(parts[5]):
                return stored
    except ValueError:
        pass
    raise KeyFileError(f"{where}.hash: not a 'scrypt$n$r$p$salt$hash' or 'sha256$salt$hash' "
                       "value (make one with: python -m service.keys new)")


def load_key_file(path: Path) -> dict[str, KeyEntry]:
    """Read and check the key file: entries by id."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise KeyFileError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise KeyFileError(f"{path} is not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise KeyFileError(f"{path}: expected an object with a list 'keys'")
    entries: dict[str, KeyEntry] = {}
    for i, item in enumerate(data["keys"]):
        where = f"keys.{i}"
        if not isinstance(item, dict):
            raise KeyFileError(f"{where}: expected an object with id, role and hash")
        unknown = set(item) - {"id", "role", "hash", "comment"}
        if unknown:
            raise KeyFileError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        key_id, role = item.get("id"), item.get("role")
        if not isinstance(key_id, str) or not KEY_ID.fullmatch(key_id):
            raise KeyFileError(f"{where}.id: 1 to 64 letters, digits, '_' or '-'")
        if role not in ROLES:
            raise KeyFileError(f"{where}.role: one of {', '.join(ROLES)}")
        if key_id in entries:
            raise KeyFileError(f"{where}.id: {key_id!r} is used twice")
        entries[key_id] = KeyEntry(key_id, role, _check_hash(item.get("hash"), where))
    return entries


def _file_version(path: Path):
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class KeyStore:
    """The keys in force, re-read when the file changes; thread-safe."""

    def __init__(self, path: Path):
        self.path = path
        self._entries = load_key_file(path)
        self._version = _file_version(path)
        self._checked = time.monotonic()
        self._lock = threading.Lock()
        self._pepper = secrets.token_bytes(32)
        self._verified: dict[bytes, KeyEntry] = {}

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
                entries = load_key_file(self.path)
            except KeyFileError as exc:
                log.error("key file not reloaded, previous keys stay in force: %s", exc)
                self._version = version
                return
            self._entries, self._version, self._verified = entries, version, {}
            log.info("key file reloaded: %d keys", len(entries))

    def lookup(self, key: str) -> tuple[KeyEntry | None, bytes | None]:
        """The entry a key names and its cache tag; ``(entry, None)`` when already verified,
        ``(None, None)`` when it names no entry (nothing to hash)."""
        self._maybe_reload()
        key_id, dot, secret = key.partition(".")
        entry = self._entries.get(key_id) if dot and secret else None
        if entry is None:
            return None, None
        tag = hmac.new(self._pepper, key.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()
        known = self._verified.get(tag)
        if known is not None and known is entry:
            return entry, None
        return entry, tag

    def confirm(self, key: str, entry: KeyEntry, tag: bytes) -> bool:
        """Verify ``key`` against ``entry`` (the slow hash) and remember a success."""
        try:
            ok = verify(key, entry.hash)
        except (ValueError, MemoryError, UnicodeEncodeError):
            ok = False
        if ok:
            with self._lock:
                if len(self._verified) >= _CACHE_LIMIT:
                    self._verified.clear()
                if self._entries.get(entry.id) is entry:
                    self._verified[tag] = entry
        return ok


def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m service.keys", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("new", "make a new random key and its entry"),
                       ("hash", "hash a key read from standard input")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--role", choices=ROLES, required=True)
        p.add_argument("--id", help="key id (for 'hash', taken from the key if omitted)")
        p.add_argument("--method", choices=("scrypt", "sha256"), default="scrypt")
    args = parser.parse_args(argv)
    if args.command == "new":
        if not args.id or not KEY_ID.fullmatch(args.id):
            parser.error("--id: 1 to 64 letters, digits, '_' or '-'")
        key = f"{args.id}.{secrets.token_urlsafe(32)}"
        print(f"key (give to the caller, shown once): {key}", file=sys.stderr)
    else:
        key = sys.stdin.readline().strip()
        key_id = key.partition(".")[0]
        if "." not in key or not KEY_ID.fullmatch(key_id) or (args.id and args.id != key_id):
            parser.error("a key is '<id>.<secret>' with the id of --id")
    entry = {"id": key.partition(".")[0], "role": args.role,
             "hash": hash_key(key, method=args.method)}
    print(json.dumps(entry))


if __name__ == "__main__":
    _main()

