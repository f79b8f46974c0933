"""Reading data: files (libsvm, CSV, NumPy), in-memory inputs, column mapping and the partition over parties."""
