"""Parameter sweeps: the sweep file, the resumable loop over its runs, where the runs execute, and the
summary with its figures and HTML page."""
