"""The Hydra application: `python -m orchestrator` runs one experiment job (or a sweep with -m)."""
