"""Which points of the plan a sweep runs, and in what order: the whole grid, or the adaptive search
(``search.strategy``, sweep/search/adaptive.py) that prunes points the measured ones show cannot win;
each a ``Search`` (sweep/search/strategy.py), the one protocol the driver holds."""
