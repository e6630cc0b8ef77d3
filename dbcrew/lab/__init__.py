"""The lab: planted databases, the embedded PostgreSQL, scripted services and real local models, for the
demo, the tests and the benchmarks. The product never imports it (an import-linter contract)."""
