"""Which points of the plan a sweep runs, and in what order: the whole grid, or the adaptive search
(``search.strategy``, sweep/search/adaptive.py) that prunes points the measured ones show cannot win;
each a ``Search`` (sweep/search/strategy.py), the one protocol the driver holds."""

from sweep.search.adaptive import AdaptiveSearch
from sweep.search.grid import GridOrder
from sweep.search.strategy import Search, Tables

# decide: modules other rooms use as namespaces, imported on first use

__all__ = ["AdaptiveSearch", "GridOrder", "Search", "Tables", "decide"]
