"""Gangs in the extender: all members of a pod group get a place, or none does.

`coordinator` (`GangCoordinator`: when a gang is planned, what it holds, why its members wait),
`plans` (what a gang's plan is, the kubelet's reuse of init-container GPUs folded around it),
`claims` (gangs whose members' devices come from ResourceClaims: all or nothing at bind),
`cache_view` (`GangCache`: the few members of the cache the gang parts may use, so the cache
imports them and not the other way round) and `record` (the gangs the queue leader decided to
release, carried on its Lease).
"""
