"""Writing a file whole, under a name nobody can have prepared: the scripts' counterpart of the
library's ExclusiveTemporary (include/sparsgd/core/file_io.hpp). The text goes to a fresh file made
exclusively beside the target (mkstemp: O_CREAT | O_EXCL, never through a link planted there), is
flushed to disk, and is renamed onto the target, which replaces whatever the target was (a link
included) and never writes through it. A reader sees the old file or the whole new one."""

import os
import pathlib
import tempfile


def write_atomically(path, text):
    path = pathlib.Path(path)
    fd, staged = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(staged, 0o644)
        os.replace(staged, path)
    except BaseException:
        try:
            os.unlink(staged)
        except FileNotFoundError:
            pass
        raise
