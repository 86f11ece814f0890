"""The leader Lease's annotations as the queue release loop sees them, for tests."""

from __future__ import annotations


class Lease:
    """The leader Lease's annotations as `LeaderElector` carries them: what one term carries,
    the next reads (tests/adapters/test_leader.py pins the elector's side)."""

    def __init__(self) -> None:
        self.annotations: dict[str, str] = {}

    def annotation(self, key: str) -> str | None:
        return self.annotations.get(key)

    def carry(self, key: str, value: str | None) -> None:
        if value is None:
            self.annotations.pop(key, None)
        else:
            self.annotations[key] = value
