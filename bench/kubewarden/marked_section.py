"""The benchmark scripts' sections of BENCHMARKS.md: each script owns the text between its own
`<!-- NAME:begin -->` and `<!-- NAME:end -->` markers and rewrites only that (the Rust harness,
gpu-bench, keeps every marked section it does not write)."""

import argparse
import os
import tempfile
from pathlib import Path


def markers(name):
    """The markers of section `name`: (`<!-- NAME:begin -->`, `<!-- NAME:end -->`)."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def replace(document, begin, end, section):
    """`document` with the text from `begin` to `end`, both markers included, replaced by
    `section` (which carries its own markers); `section` appended after a blank line when the
    document has neither marker. ValueError when it has only one of them, or `end` first."""
    start, stop = document.find(begin), document.find(end)
    if start >= 0 and stop > start:
        return document[:start] + section.rstrip("\n") + document[stop + len(end):]
    if start >= 0 or stop >= 0:
        raise ValueError(f"only one of {begin} and {end} is present, or they are out of order; "
                         "fix the file by hand")
    return (document.rstrip("\n") + "\n\n" if document.strip() else "") + section


def write(path, begin, end, section):
    """Replaces the section between `begin` and `end` of the file `path` (created when missing)
    with `section`, as `replace` does, writing the file whole (a temporary file renamed over it).
    ValueError naming the file when its markers are broken."""
    path = Path(path)
    document = path.read_text() if path.exists() else ""
    try:
        document = replace(document, begin, end, section)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(document)
    os.replace(tmp, path)


def argument_parser():
    """An argument parser with the options `print_or_write` serves: `--out FILE` and `--print`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--print", action="store_true")
    return parser


def print_or_write(out, print_it, begin, end, section):
    """The ending of a script with `--out FILE` and `--print`: prints `section` when `print_it` is
    set or no file is named, and, when `out` names a file, replaces its section there as `write`
    does."""
    if print_it or not out:
        print(section)
    if out:
        write(out, begin, end, section)
