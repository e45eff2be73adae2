"""What a run measures and when it stops: the observer and the exact-target tracker.

- :mod:`sim.engine.observe.observer`: recorder, stop rule with its reason, health, interrupt;
- :mod:`sim.engine.observe.targets`: thresholds on ``var``/``var_alive`` and their first crossings;
- :mod:`sim.engine.observe.tracker`: float64 moments updated at every change of the state, for
  exact crossing times between samples (:mod:`~sim.engine.observe.moments`,
  :mod:`~sim.engine.observe.roots`, :mod:`~sim.engine.observe.replay`);
- :mod:`sim.engine.observe.wiring`: how the engine tells the tracker about churn.
"""
