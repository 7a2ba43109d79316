"""Schedulers: per-device execution orders."""
