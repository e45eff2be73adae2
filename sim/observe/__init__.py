"""What a run measures and when it stops: the observer and the exact-target tracker.

- :mod:`sim.observe.observer`: recorder, stop rule with its reason, health, interrupt;
- :mod:`sim.observe.targets`: thresholds on ``var``/``var_alive`` and their first crossings;
- :mod:`sim.observe.tracker`: float64 moments updated at every change of the state, for
  exact crossing times between samples (:mod:`~sim.observe.moments`,
  :mod:`~sim.observe.roots`, :mod:`~sim.observe.replay`);
- :mod:`sim.observe.wiring`: how the engine tells the tracker about churn.
"""
