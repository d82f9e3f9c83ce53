"""Writing a file so that readers never see half of it, from any process or thread."""
from __future__ import annotations

import os
import threading
from pathlib import Path


def replace_text(path: Path, text: str) -> None:
    """Writes `text` to a temporary file beside `path`, then renames it over `path`. The temporary name carries the
    process and the thread: the campaign's lanes are threads of one process, and two of them storing the same kernel
    (a source that does not depend on the shape, proposed for two shapes at once) shared one name, so the second
    rename found its file gone."""
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
