"""Every family's fit of one `fit` call, in this process or in worker processes, one family per task.

The families are independent: each one's pooled fit (on `start`, the increments that start the per-device
fits) and, in the two-stage method, its per-device fits and population (`population.fit_population`). With
`workers` > 1 they run in that many processes (`aimc.common.workers`: joblib's loky workers, each on one Numba
thread; kept for the next call, so a refit or a second fit does not start them again), and the results come
back in `kinds` order: every fit is deterministic, so the result does not depend on `workers`. Processes, not threads,
because scipy's trust-region steps hold the GIL: the per-device fits on two threads took 29.8 s against
34.2 s on one for the 16-device reram_sb fit on two cores (docs/performance.md). A worker imports the
package when it starts (2-3 s, once per process).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
from joblib import delayed
from tqdm import tqdm

from aimc.calibration.families import Family, families, with_noise
from aimc.calibration.family_fit import FamilyFit, fit_family
from aimc.calibration.population import fit_population, identification
from aimc.calibration.pulse_data import PulseData
from aimc.common.workers import worker_pool

FamilyResult = tuple[FamilyFit, FamilyFit, dict[int, FamilyFit]]
"""One family's (pooled fit, population or pooled fit as ranked, per-device fits by device index)."""


@dataclass
class FamilyJob:
    """What every family's fit shares: the increments, the start sample, the settings (`fit`'s arguments)."""

    data: PulseData
    start: PulseData  # the pooled fit's increments (a subsample of data where it is large)
    n_nodes: int
    noise: dict | None  # the cycle noise held fixed in every family (`families.with_noise`); None: none
    table: FamilyFit | None  # the pooled table, the tabulated family's fit
    n_bins: int
    two_stage: bool  # per-device fits and a population; off: the pooled fit alone
    shared: bool  # the population may be one shared parameter set (`population.fit_population`)

    def specs(self) -> dict[str, Family]:
        """The fit specifications of every parametric family, with the cycle noise where it is held fixed."""
        specs = families(self.n_nodes, self.data.dw0)
        return specs if self.noise is None else {k: with_noise(f, self.noise) for k, f in specs.items()}

    def run(self, kind: str, specs: dict[str, Family], threads: int, progress: bool = False) -> FamilyResult:
        """The fits of family `kind` (its per-device fits on `threads` threads)."""
        fam = specs.get(kind)
        pooled = self.table if kind == "tabulated" else fit_family(fam, self.start)
        if not self.two_stage:
            pooled.flags = identification(fam, pooled, self.data)
            return pooled, pooled, {}
        population, per = fit_population(fam, pooled, self.data, self.n_bins, progress, self.shared, threads)
        return pooled, population, per


def _fit_in_worker(job: FamilyJob, kind: str) -> tuple[str, FamilyResult]:
    return kind, job.run(kind, job.specs(), threads=1)


def fit_each_family(
    job: FamilyJob, kinds: list[str], workers: int = 1, progress: bool = False
) -> dict[str, FamilyResult]:
    """{kind: FamilyResult} of every family in `kinds`, in that order; workers: processes (module docstring),
    1: in this process, the per-device fits on Numba's threads."""
    done = {}
    with tqdm(total=len(kinds), desc="fitting families", unit="family", disable=not progress) as bar:
        if workers == 1 or len(kinds) == 1:
            specs = job.specs()
            for k in kinds:
                done[k] = job.run(k, specs, numba.get_num_threads(), progress)
                bar.update()
        else:  # FAMILY_KINDS' costliest families come last: started first, they do not finish alone
            tasks = (delayed(_fit_in_worker)(job, k) for k in reversed(kinds))
            for k, result in worker_pool(min(workers, len(kinds)))(tasks):
                done[k] = result
                bar.update()
    return {k: done[k] for k in kinds}
