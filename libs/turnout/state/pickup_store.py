"""The worker's side of the queue under its former name (`turnout.state.jobs` owns it).

Kept so imports of the names below keep working; new code imports `turnout.state.jobs`.
Must not import: services, FastAPI, httpx, arq.
"""

from turnout.state.jobs.pickup import _PICK, Picked, PickupStore

__all__ = ["_PICK", "Picked", "PickupStore"]
