"""The contracts' compiled artifacts and where the package finds its own files."""
