"""The scheduling policy: pure functions over plain data.

No ORM and no cluster calls in here, so the same code runs in the Celery cycle,
in unit and property tests, and in the trace simulator.
"""
