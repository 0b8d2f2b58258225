"""The ground floor: errors (the AKDError hierarchy), atomic file writes, the run directory, signal handling.

Imports nothing else of AKD; everything else may import it."""
