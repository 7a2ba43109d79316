"""`python -m orchestrator.report [EXPERIMENT]`: see orchestrator.report.cli."""

from .cli import main

if __name__ == "__main__":
    main()
