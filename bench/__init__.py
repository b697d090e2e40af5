"""convograph's benchmarks: ratios measured side by side in one run (`python -m bench`)."""
