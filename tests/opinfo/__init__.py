"""OpInfo conformance harness: PyTorch's OpInfo database (op_db) run on tpu against CPU.

harness.py  compares one OpInfo's variants (forward per dtype, backward, in-place, out=, error inputs)
run.py      the sweep: worker subprocesses in chunks, results as JSON lines, then the report
report.py   writes docs/op_coverage.md from the results
test_opinfo_slice.py  the bounded CI slice (pytest)
"""
