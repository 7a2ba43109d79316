"""The stages of a job, one module per concept (docs/architecture.md draws them):

    graph.py          graph (model -> OpGraph), profile (profiler), comm (communication fit)
    optimize.py       graph passes (coarsening) before placement
    place.py          placement, and `place_graph`: graph -> profile -> comm -> optimize -> place
    schedule.py       per-device op order
    simulate.py       the simulator's predicted step, and the per-run pictures
    run.py            the real execution (a backends.base.Runtime)
    pipeline.py       micro-batch pipeline schedules (pipeline=...)
    standard_eval.py  Celeritas' Standard Evaluation profiler

Every stage takes the job's `orchestrator.context.JobContext`; its output is cached under a key built from its
resolved config and its inputs' keys. A stage module imports the context and the registry, never app.py.
"""
