"""hobbit's version, on the ground floor: the package's interface exports it and the
compile cache keys its entries with it, so it must be importable from the lowest layer."""

__version__ = "0.1.0"
