"""devices.jit_cache: a cached kernel follows a change in a module it inlines from."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TABLE = (
    "import numpy as np\nfrom numba import njit\nSTEP = np.array([{step}])\n\n\n"
    "@njit(cache=True, inline='always')\ndef step(k):\n    return STEP[k]\n"
)
KERNEL = "from numba import njit\nfrom table import step\n\n\n@njit(cache=True)\ndef kernel():\n    return step(0)\n"
RUN = (
    "import sys; sys.path.insert(0, {root!r})\nimport kernel, table\n"
    "from aimc.devices.jit_cache import flush_stale\n{flush}print(kernel.kernel())\n"
)


def _run(root: Path, flush: bool) -> str:
    code = RUN.format(root=str(root), flush="flush_stale([kernel], [table])\n" if flush else "")
    return subprocess.run([sys.executable, "-B", "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_a_kernel_follows_its_inlined_module_only_with_the_flush(tmp_path):
    (tmp_path / "kernel.py").write_text(KERNEL)
    for flush in (False, True):
        (tmp_path / "table.py").write_text(TABLE.format(step=1.5))
        assert _run(tmp_path, flush) == "1.5"
        (tmp_path / "table.py").write_text(TABLE.format(step=2.5))
        # Numba checks only kernel.py's stamp: without the flush the cached kernel keeps the old table
        assert _run(tmp_path, flush) == ("2.5" if flush else "1.5")
        assert _run(tmp_path, flush) == ("2.5" if flush else "1.5")


def test_every_module_with_cached_kernels_is_flushed_with_the_others():
    """A module whose cached kernels inline another module's kernels must be in CACHED_MODULES, or its cache
    outlives a change there (a stale c-TTv2 kernel once stepped SoftBoundsReference elements as another family)."""
    import aimc.devices as devices

    root = Path(devices.__file__).parent
    cached = {p.stem for p in root.glob("*.py") if re.search(r"@(njit|jit)\(.*cache=True", p.read_text())}
    assert "array_update" in cached
    assert cached <= {m.__name__.rsplit(".", 1)[1] for m in devices.CACHED_MODULES}
