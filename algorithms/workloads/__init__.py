"""Workloads: synthetic graphs and devices."""
