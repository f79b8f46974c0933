"""Compiled (numba) kernels of a tree level: histograms, split search, exact limbs and 256-bit integers.

The lowest layer of the parties' side: plain arrays in, plain arrays out, no protocol objects."""
