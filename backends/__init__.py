"""Framework adapters (torch/, tensorflow/): model zoo, capture, profiler, runtime."""
