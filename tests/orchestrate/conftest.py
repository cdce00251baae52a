import pytest

from tests.orchestrate import standins


@pytest.fixture(scope="module")
def sim_cluster():
    """Three simulated GPU hosts (1 head + 3 nodes), shared by a module's tests."""
    from ray import cloudpickle

    from sweep.orchestrate.cluster import SimulatedCluster

    cloudpickle.register_pickle_by_value(standins)
    c = SimulatedCluster(3, "gpu_host", 8)
    yield c
    c.shutdown()
