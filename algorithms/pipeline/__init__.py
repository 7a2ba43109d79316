"""Micro-batch pipeline schedules: the block model, validator, baselines, Tessel's search and the runtime plan."""
