"""A trace's identity: the SHA-256 of its file's content, which names it whatever its path."""

from __future__ import annotations

import os


def file_digest(path: str) -> tuple[int, str]:
    """(size in bytes, SHA-256 hex digest) of a trace file's content, read once: what
    names a trace, whatever its path. Raises OSError if it cannot be read."""
    import hashlib  # (here: 5 ms of import that a remembered digest does without)

    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def remembered_digest(path: str, memo: str) -> str:
    """The SHA-256 of the file at `path`, hashed once per version of the file.

    Hashing costs about 1.4 ms per MB (seconds for a trace of gigabytes), so the digest is
    kept in the folder `memo` under the file's device, inode, size, mtime and ctime: a
    file written again changes its mtime and its ctime, and the ctime cannot be set back
    (restoring an mtime with `touch -d` moves the ctime on). Raises OSError if the trace
    cannot be read; a memo that cannot be read or written only costs the hashing.
    """
    known = recalled_digest(path, memo)
    if known is not None:
        return known
    name = _memo_name(os.stat(path))
    entry = os.path.join(memo, name)
    _size, sha256 = file_digest(path)
    try:
        os.makedirs(memo, exist_ok=True)
        temporary = os.path.join(memo, f".{name}.{os.getpid()}")
        with open(temporary, "w") as f:
            f.write(sha256)
        os.replace(temporary, entry)  # whole or absent, whoever reads it meanwhile
    except OSError:
        pass
    return sha256


def recalled_digest(path: str, memo: str) -> str | None:
    """The digest `remembered_digest` kept for this version of the file, or None (not
    hashed yet, or the memo unreadable). Raises OSError if the file cannot be stat()ed."""
    entry = os.path.join(memo, _memo_name(os.stat(path)))
    try:
        with open(entry, "rb") as f:
            known = f.read(65)
    except OSError:
        return None
    if len(known) == 64 and all(c in b"0123456789abcdef" for c in known):
        return known.decode()
    return None


def _memo_name(st: os.stat_result) -> str:
    return f"{st.st_dev}-{st.st_ino}-{st.st_size}-{st.st_mtime_ns}-{st.st_ctime_ns}"
