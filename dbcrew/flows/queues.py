"""The work pool's queues, by name: what a worker may serve (`--work-queue`) and what each run is put on.

Free of prefect on purpose: `dbcrew server` checks the queues it is given before it points Prefect at its own
server, and prefect read before that would keep its default API (an ephemeral server of its own).

A diagnosis started by an incident or an alert has a queue of its own, polled first: on `reviews` it waited
behind whatever the nightly fleet had queued there (issue 31's run at 1,000 targets: three of five incident
diagnoses still Scheduled when the fleet was cancelled after 8 minutes). A queue's limit in Prefect holds only
its own runs, so `incidents` starts its runs while `reviews` is full, and its own limit keeps a storm of
incidents (one shared cause trips many targets at once) from taking the pool from the fleet in turn.
"""

from enum import StrEnum


class PoolQueue(StrEnum):
    """A queue of the crew's work pool (its value is the queue's name in Prefect)."""

    REVIEWS = "reviews"  # one review a run, at most --max-reviews at once over the pool
    FLEET = "fleet"  # the fleet runs and the schedules' slots, which fan out to `reviews`
    INCIDENTS = "incidents"  # a diagnosis an incident or alert started; --max-diagnoses at once
    WATCH = "watch"  # whose workers share the watching (dbcrew/flows/watching.py WatchShares)


QUEUES = tuple(PoolQueue)

# Prefect's work-queue priority (1 polled first): a worker is handed the runs of its queues in this order, and
# where its own limit (`prefect worker start --limit`) or the pool's cuts the list, the diagnoses come first.
PRIORITIES = {PoolQueue.INCIDENTS: 1, PoolQueue.REVIEWS: 2, PoolQueue.FLEET: 3, PoolQueue.WATCH: 4}

# Diagnoses at once over the pool (`dbcrew server --max-diagnoses`), beside the --max-reviews reviews: as many as
# the default reviews, so that a burst of incidents neither waits for the fleet nor takes more than half the
# pool's runs from it (docs/operate.md, "The pool's queues").
MAX_DIAGNOSES = 2
