"""The async engine's default DHT delay (a route latency plus the peers' median latency)
takes its median without overflow when latencies are near the largest float."""

import warnings

import sim


def test_latencies_near_the_largest_float_give_no_overflow_warning():
    scenario = sim.scenario_from_mapping(
        {
            "name": "huge-latency",
            "clock": "network",
            "schedule": "async",
            "peers": {"count": 8, "latency": {"dist": "uniform", "low": 1e308,
                                              "high": 1.7976931348623157e308}},
            "vector": {"dim": 4},
            "protocol": {"name": "moshpit", "group_size": 2, "grid_dims": 3},
            "stop": {"max_time": 100},
        }
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # np.median's "overflow encountered" fails here
        result = sim.run(scenario, seed=0)
    # no message can arrive before max_time: nothing is averaged, and nothing breaks
    assert result.summary["stop_reason"] == "max_time"
    assert result.summary["steps_median"] == 0
