"""Where the evaluation data lives: one resolver for every data file the harness reads.

A file is looked for, in this order: the ``path`` the caller gives (``--data``); the folder named by
``$EDGEWISE_DATA`` (when set, it is the only place looked in, so a wrong setting is not hidden by a
fallback); ``../shared/data`` beside the working directory or beside the source checkout, where
such a folder exists. When none holds the file, the error names every place tried and how to pass
the file.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp(); open(os.path.join(folder, "x.jsonl"), "w").close()
>>> data_path("x.jsonl", folder).name
'x.jsonl'
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError

DATA_ENV = "EDGEWISE_DATA"


def shared_dirs() -> list[Path]:
    """The default data folders: ``../shared/data`` beside the working directory and beside the checkout."""
    # src/edgewise/eval/data.py -> parents[3] is the checkout; its parent holds shared/ in a source tree
    here = Path(__file__).resolve().parents[4] / "shared" / "data"
    cwd = Path.cwd().resolve().parent / "shared" / "data"
    return list(dict.fromkeys([cwd, here]))


def data_path(filename: str, path: str | Path | None = None) -> Path:
    """The data file ``filename``: ``path`` (a file, or a folder holding it), else ``$EDGEWISE_DATA``,
    else ``../shared/data``; an :class:`~edgewise.errors.InputError` naming every place tried."""
    if path is not None:
        given = Path(path)
        found = given / filename if given.is_dir() else given
        if found.is_file():
            return found
        raise InputError(f"data file {str(found)!r} does not exist; pass an existing file with --data FILE")
    env = os.environ.get(DATA_ENV)
    if env:
        found = Path(env) / filename
        if found.is_file():
            return found
        raise InputError(f"data file {filename!r} is not in ${DATA_ENV} ({env}); put it there, pass --data FILE, "
                         f"or unset {DATA_ENV} to use ../shared/data")
    tried = shared_dirs()
    for folder in tried:
        if (folder / filename).is_file():
            return folder / filename
    raise InputError(
        f"data file {filename!r} not found: --data was not given, ${DATA_ENV} is not set, and it is not in "
        + " or ".join(str(d) for d in tried)
        + f"; pass --data FILE or set {DATA_ENV}=FOLDER"
    )
