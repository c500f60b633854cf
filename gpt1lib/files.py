"""Files a run writes, written atomically (``atomic_path``: beside their place, then renamed
onto it) and read back with a ``CheckpointError`` naming a damaged file and the fix; nothing is
unpickled. ``clean_leftovers`` removes what a crash mid-write left.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file


class CheckpointError(ValueError):
    """A checkpoint folder is not a checkpoint, is damaged, or does not belong to this run."""


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, as hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_json(path: str | os.PathLike, fix: str):
    """The JSON in ``path``; a ``CheckpointError`` naming it and ``fix`` if it is not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path} is not valid JSON ({type(e).__name__}: {e}); {fix}") from e


#: The fix for a damaged file of a checkpoint (``damaged``'s default).
RESUME_ELSEWHERE = (
    "resume from another checkpoint (delete this one), or start a new run in another out_dir"
)


def damaged(path: Path, e: Exception | str, fix: str = RESUME_ELSEWHERE) -> CheckpointError:
    why = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
    return CheckpointError(f"{path} is damaged ({why}): it is not the file that was written; {fix}")


def verify_files(folder: Path, digests: dict[str, str]) -> None:
    """Check each file of ``folder`` named in ``digests`` against its recorded sha256."""
    for name, digest in digests.items():
        if file_sha256(folder / name) != digest:
            raise damaged(folder / name, "its sha256 differs from the one recorded at writing")


def load_tensors(
    path: Path, device: str | torch.device = "cpu", fix: str = RESUME_ELSEWHERE
) -> dict[str, torch.Tensor]:
    """A safetensors file; a ``CheckpointError`` naming it and ``fix`` if it is not whole."""
    try:
        return load_file(str(path), device=str(device))
    except Exception as e:  # safetensors' SafetensorError: truncated, or not a safetensors file
        raise damaged(path, e, fix) from e


def load_array(path: Path, fix: str) -> np.ndarray:
    """An ``.npy`` file's array, never unpickled (else a ``CheckpointError`` naming it, ``fix``)."""
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        why = "numpy reads it as pickled objects, which gpt1lib never loads: they can run code"
        raise damaged(path, why if "pickle" in str(e) else e, fix) from e


def not_utf8(path: str | os.PathLike, e: UnicodeDecodeError) -> ValueError:
    """The error for a text file ``path`` in another encoding than UTF-8, naming the fix."""
    return ValueError(
        f"{path} is not UTF-8 text ({e.reason} at byte {e.start}): convert it, e.g. "
        f"iconv -f latin1 -t utf-8 '{path}' > utf8.txt (then give the converted file its name)"
    )


def write_failed(path: str | os.PathLike, e: OSError) -> OSError:
    """``e``, a write to ``path`` that failed (a full disk), naming ``path`` and its free space."""
    free = shutil.disk_usage(Path(path).parent).free / 2**20 if Path(path).parent.is_dir() else 0
    why = f"writing {path} failed ({e.strerror or e}), {free:,.0f} MiB free on its filesystem: "
    why += "make room (or write elsewhere) and run again"
    return OSError(e.errno, why) if e.errno else OSError(why)


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; when the block ends without an error it is
    synced and renamed onto ``path``, else removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as e:
        raise write_failed(path, e) from e
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: str | os.PathLike, obj) -> None:
    """``obj`` as indented JSON at ``path``, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=1))


def write_tensors(path: Path, tensors: dict) -> str:
    """``tensors`` (on any device) as a safetensors file at ``path``, atomically; its sha256.
    A failed write is the ``OSError`` safetensors names in its own error."""
    with atomic_path(path) as tmp:
        try:
            save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp))
        except SafetensorError as e:
            if not (code := re.search(r"os error (\d+)", str(e))):
                raise
            raise OSError(int(code[1]), os.strerror(int(code[1]))) from e
        return file_sha256(tmp)  # atomic_path's end then renames it into place


#: What an interrupted write leaves: ``atomic_path``'s ``.<name>.tmp<pid>`` files and
#: ``save_checkpoint``'s ``.tmp-<name>-<pid>`` / ``.old-<name>-<pid>`` folders.
LEFTOVER = re.compile(r"^\.(?:tmp-.+-|old-.+-|.+\.tmp)(\d+)$")


def is_running(pid: int) -> bool:
    """Whether process ``pid`` (not this one) runs on this machine."""
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def clean_leftovers(
    folder: str | os.PathLike, depth: int = 0, only_dead: bool = False
) -> list[Path]:
    """Remove (and return) what interrupted writes left in ``folder`` and ``depth`` levels of
    sub-folders; with ``only_dead``, only what processes no longer running left."""
    removed: list[Path] = []
    folder = Path(folder)
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        m = LEFTOVER.match(path.name)
        if m is not None and not (only_dead and is_running(int(m.group(1)))):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
        elif m is None and depth > 0 and path.is_dir():
            removed += clean_leftovers(path, depth - 1, only_dead)
    return removed
