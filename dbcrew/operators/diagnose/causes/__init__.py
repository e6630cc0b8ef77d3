"""The root causes of the diagnosis, one declaration each (declaration.py), by family: resources
(the CPU, memory, the disks), workload, query (plans and indexes), concurrency (locks, the commit's
WAL flush), maintenance (vacuum). dbcrew/operators/diagnose/experts.py derives the team and the
tables the diagnosis consumes from them."""
