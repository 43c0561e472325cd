#!/usr/bin/python3
"""A sweep's runs as one committed table: a JSON line per run, holding the text of each of the run's
files (RUN.json, RUN.load, RUN.machine, ...) under its extension. A sweep writes its runs as files
in a scratch folder (runs/, not committed), packs them into the table once a point is done, and
unpacks the table into the folder before it continues or reports, so that a later sitting on a
fresh machine goes on where the last one stopped and the report regenerates from the table.

Usage:
  run_table.py pack DIR TABLE     every file under DIR into TABLE (rewritten whole, atomically)
  run_table.py unpack TABLE DIR   TABLE's files into DIR; a file already there must hold the same text
"""

import json
import pathlib
import sys

from atomic_file import write_atomically


def split(relative):
    """'1/P-N-D-NET-gtopk-rd.drawn.json' -> ('1/P-N-D-NET-gtopk-rd.drawn', 'json'); no extension: ''."""
    folder, _, name = relative.rpartition("/")
    stem, dot, extension = name.rpartition(".")
    # A name whose only dot is inside a number (P-N-0.01-NET) has no extension: it is the whole name.
    if not dot or not extension.replace("-", "").isalpha():
        stem, extension = name, ""
    return (f"{folder}/{stem}" if folder else stem), extension


def join(run, extension):
    return f"{run}.{extension}" if extension else run


def pack(folder, table):
    runs = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        run, extension = split(path.relative_to(folder).as_posix())
        runs.setdefault(run, {})[extension] = path.read_text()
    write_atomically(table, "".join(json.dumps({"run": run, "files": runs[run]}, separators=(",", ":"), sort_keys=True)
                                    + "\n" for run in sorted(runs)))
    print(f"run_table: {len(runs)} runs in {table}", file=sys.stderr)


def unpack(table, folder):
    if not table.exists():
        return
    count = 0
    for number, line in enumerate(table.read_text().splitlines(), 1):
        record = json.loads(line)
        for extension, text in record["files"].items():
            relative = join(record["run"], extension)
            if relative.startswith("/") or ".." in pathlib.PurePosixPath(relative).parts:
                sys.exit(f"run_table: {table}:{number}: '{relative}' is not a path inside the folder")
            path = folder / relative
            if path.exists():
                if path.read_text() != text:
                    sys.exit(f"run_table: {path} differs from its record in {table}:{number}; "
                             "move one of them away")
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, text)
            count += 1
    print(f"run_table: {count} files from {table} into {folder}", file=sys.stderr)


def main(argv):
    if len(argv) != 3 or argv[0] not in ("pack", "unpack"):
        sys.exit(__doc__.split("Usage:")[1].rstrip())
    if argv[0] == "pack":
        pack(pathlib.Path(argv[1]), pathlib.Path(argv[2]))
    else:
        unpack(pathlib.Path(argv[1]), pathlib.Path(argv[2]))


if __name__ == "__main__":
    main(sys.argv[1:])
