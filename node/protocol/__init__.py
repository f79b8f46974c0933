"""The protocol's steps as the parties and the contract play them: resolution of a level, endorsement and
verification of histograms, message sizes."""
