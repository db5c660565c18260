"""Training runs: the network of a config, the training loop, comparisons, retention, and the run folder
with its lock, metric log and timestamps. `aimc.runs.experiment.run_experiment` is the entry point."""
