"""The work pool's queues, by name: what a worker may serve (`--work-queue`) and what each deployment is put on.

Free of prefect on purpose: `dbcrew server` checks the queues it is given before it points Prefect at its own
server, and prefect read before that would keep its default API (an ephemeral server of its own)."""

REVIEW_QUEUE = "reviews"  # one review a run, at most --max-reviews at once over the pool
FLEET_QUEUE = "fleet"  # the fleet runs and the schedules' slots, which fan out to `reviews`
WATCH_QUEUE = "watch"  # whose workers share the watching (dbcrew/flows/watching.py WatchShares)
QUEUES = (REVIEW_QUEUE, FLEET_QUEUE, WATCH_QUEUE)
